//! Acting from the page: a confirmation that says exactly what will change (how many
//! letters, which steps), then the console command's own function, run as `--yes` runs
//! it and audited the same way. Only a form this server rendered (it carries the
//! anti-forgery token) is acted on.

use axum::extract::{Form, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use schedkit::Status;
use schedkit::ops::chains::ChainRuns;
use schedkit::ops::executions::Records;

use super::dlq::{self, Filters};
use super::html::{self, run_link};
use super::once::Done;
use super::page::PageError;
use super::state::Shared;
use crate::cli::{Acted, chains_cmd, dlq_cmd, executions_cmd, fire_cmd, jobs_cmd};

/// An action and what it acts on, from a confirmation's link or form.
#[derive(Debug, Clone)]
enum Action {
    Pause { job: String },
    Resume { job: String },
    Fire { job: String },
    Cancel { key: String },
    Rerun { key: String },
    ChainCancel { key: String },
    Skip { key: String, step: String },
    Redrive { filters: Filters, ids: Vec<String> },
    Purge { filters: Filters, ids: Vec<String> },
}

/// The fields of a query or form: each name may come more than once (`message_id`).
struct Fields(Vec<(String, String)>);

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, v)| k == name && !v.trim().is_empty())
            .map(|(_, v)| v.trim())
    }

    fn need(&self, name: &str) -> Result<String, PageError> {
        self.get(name)
            .map(str::to_owned)
            .ok_or_else(|| PageError::bad(format!("the request names no `{name}`")))
    }

    fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, v)| k == name && !v.trim().is_empty())
            .map(|(_, v)| v.trim().to_string())
            .collect()
    }

    fn action(&self) -> Result<Action, PageError> {
        let filters = || Filters {
            job: self.get("job").unwrap_or_default().into(),
            reason: self.get("reason").unwrap_or_default().into(),
            key: self.get("key").unwrap_or_default().into(),
            older_than: self.get("older_than").unwrap_or_default().into(),
        };
        Ok(match self.need("action")?.as_str() {
            "pause" => Action::Pause {
                job: self.need("job")?,
            },
            "resume" => Action::Resume {
                job: self.need("job")?,
            },
            "fire" => Action::Fire {
                job: self.need("job")?,
            },
            "cancel" => Action::Cancel {
                key: self.need("key")?,
            },
            "rerun" => Action::Rerun {
                key: self.need("key")?,
            },
            "chain-cancel" => Action::ChainCancel {
                key: self.need("key")?,
            },
            "skip" => Action::Skip {
                key: self.need("key")?,
                step: self.need("step")?,
            },
            "redrive" => Action::Redrive {
                filters: filters(),
                ids: self.all("message_id"),
            },
            "purge" => Action::Purge {
                filters: filters(),
                ids: self.all("message_id"),
            },
            other => {
                return Err(PageError::bad(format!(
                    "`{other}` is not an action of this page"
                )));
            }
        })
    }
}

/// What the confirmation says will change, the fields its form sends, and whether there
/// is anything to do at all.
struct Plan {
    title: String,
    says: Markup,
    fields: Vec<(String, String)>,
    /// A reason the operator must give (pause, cancel, skip).
    reason: Option<&'static str>,
    nothing: bool,
}

pub async fn confirm(
    State(ui): State<Shared>,
    Query(q): Query<Vec<(String, String)>>,
) -> Result<Response, PageError> {
    let fields = Fields(q);
    let action = fields.action()?;
    let plan = plan(&ui, &action, &fields).await?;
    let body = html! {
        section.confirm aria-labelledby="what" {
            p #what .says { (plan.says) }
            @if plan.nothing {
                p { a.button href="/" { "Back to the overview" } }
            } @else {
                form method="post" action="/act" {
                    input type="hidden" name="csrf" value=(ui.access.form_token());
                    input type="hidden" name="once" value=(ui.confirmations.issue());
                    @for (k, v) in &plan.fields { input type="hidden" name=(k) value=(v); }
                    @if let Some(label) = plan.reason {
                        label { (label) " " input type="text" name="why" required size="50" autofocus; }
                    }
                    button.danger type="submit" #confirm { "Yes, " (plan.title.to_lowercase()) }
                    " "
                    a href="/" { "No, take me back" }
                }
            }
        }
    };
    Ok(html::page(&ui.frame(&plan.title, ""), body).into_response())
}

/// The confirmation of `action`, read from the stage as it is now.
async fn plan(ui: &Shared, action: &Action, fields: &Fields) -> Result<Plan, PageError> {
    let stage = ui.stage.stage.clone();
    let pass = |names: &[&str]| -> Vec<(String, String)> {
        fields
            .0
            .iter()
            .filter(|(k, _)| names.contains(&k.as_str()))
            .cloned()
            .collect()
    };
    Ok(match action {
        Action::Pause { job } => Plan {
            title: format!("Pause {job}"),
            says: html! { "Pause job " strong { (job) } " on stage " (stage) ": its schedule becomes DISABLED (no more firings) until someone resumes it; runs already queued still run." },
            fields: pass(&["action", "job"]),
            reason: Some("Why (shown to whoever looks next):"),
            nothing: false,
        },
        Action::Resume { job } => Plan {
            title: format!("Resume {job}"),
            says: html! { "Resume job " strong { (job) } " on stage " (stage) ": its schedule becomes ENABLED again and fires from its next time." },
            fields: pass(&["action", "job"]),
            reason: None,
            nothing: false,
        },
        Action::Fire { job } => Plan {
            title: format!("Run {job} now"),
            says: html! { "Run " strong { (job) } " now on stage " (stage) ": one run with the catalog's payload and its own key is sent to the jobs queue." },
            fields: pass(&["action", "job"]),
            reason: None,
            nothing: false,
        },
        Action::Cancel { key } => {
            let record = Records::new(&ui.sdk, &ui.stage.table).get(key).await?;
            let status = record
                .map(|r| r.status.to_string())
                .unwrap_or_else(|| "no record yet".into());
            Plan {
                title: "Cancel the run".into(),
                says: html! { "Cancel run " (run_link(key)) " (now " (status) "): its record becomes CANCELLED, a running attempt stops at its next heartbeat with its effects never committed, and no message of this key runs it again." },
                fields: pass(&["action", "key"]),
                reason: Some("Why:"),
                nothing: false,
            }
        }
        Action::Rerun { key } | Action::ChainCancel { key } | Action::Skip { key, .. } => {
            chain_plan(ui, action, key, &pass(&["action", "key", "step"])).await?
        }
        Action::Redrive { filters, ids } | Action::Purge { filters, ids } => {
            let redrive = matches!(action, Action::Redrive { .. });
            let mut letters = dlq::selected(ui, filters).await?.letters;
            if !ids.is_empty() {
                letters.retain(|d| ids.contains(&d.message_id));
            }
            let n = letters.len();
            let what = describe(filters, n);
            let mut fields = pass(&["action", "job", "reason", "key", "older_than"]);
            // The letters counted here and no others: one that arrives meanwhile waits
            // for another look.
            fields.extend(
                letters
                    .iter()
                    .map(|d| ("message_id".to_string(), d.message_id.clone())),
            );
            let title = if redrive {
                format!("Redrive {n} dead letter{}", plural(n))
            } else {
                format!("Purge {n} dead letter{}", plural(n))
            };
            Plan {
                title,
                says: html! {
                    @if n == 0 { "No dead letter matches: nothing to do." }
                    @else if redrive {
                        "Redrive " strong.count { (n) " dead letter" (plural(n)) } " (" (what) ") to the jobs queue of stage " (stage)
                        ": each is sent back, then deleted from the DLQ; each run gets a fresh set of attempts."
                    } @else {
                        "Delete " strong.count { (n) " dead letter" (plural(n)) } " (" (what) ") from the DLQ of stage " (stage) " for good: they cannot be redriven after this."
                    }
                    @if n > 0 {
                        ul.letters { @for d in &letters {
                            li { code { (d.message_id.chars().take(8).collect::<String>()) } " " (d.job.as_deref().unwrap_or("–")) " " (d.reason.as_deref().unwrap_or(schedkit::dead_letter::REDRIVE_POLICY)) }
                        } }
                    }
                },
                fields,
                reason: None,
                nothing: n == 0,
            }
        }
    })
}

/// The confirmation of a chain run's rerun, cancel or skip, from its view.
async fn chain_plan(
    ui: &Shared,
    action: &Action,
    key: &str,
    fields: &[(String, String)],
) -> Result<Plan, PageError> {
    let view = ChainRuns::new(&ui.sdk, &ui.stage, &ui.catalog)
        .show(key)
        .await?
        .ok_or_else(|| PageError::not_found(format!("there is no chain run `{key}`")))?;
    let open: Vec<String> = view
        .stages
        .iter()
        .flatten()
        .filter(|s| s.status != Some(Status::Done))
        .map(|s| s.step.clone())
        .collect();
    let fields = fields.to_vec();
    Ok(match action {
        Action::Rerun { .. } => Plan {
            title: "Rerun the chain run".into(),
            says: html! { "Rerun chain run " strong { (key) } " (" (view.status.to_string()) ") from its failed step as run " (view.run + 1)
            ": these steps run again: " strong.steps { (open.join(", ")) } "; the DONE steps answer from their records without running." },
            fields,
            reason: None,
            nothing: open.is_empty() && view.status == Status::Done,
        },
        Action::ChainCancel { .. } => Plan {
            title: "Cancel the chain run".into(),
            says: html! { "Cancel chain run " strong { (key) } " (" (view.status.to_string()) "): its record becomes CANCELLED, its execution is stopped, and its steps not yet decided (" (open.join(", ")) ") are cancelled; no later stage starts." },
            fields,
            reason: Some("Why:"),
            nothing: false,
        },
        Action::Skip { step, .. } => Plan {
            title: format!("Skip {step}"),
            says: html! { "Skip step " strong { (step) } " of chain run " strong { (key) } ": the step becomes DONE with the output {} (its failure kept, with who skipped it and why), and the run goes on with its later stages." },
            fields,
            reason: Some("Why (kept on the step's record):"),
            nothing: false,
        },
        _ => unreachable!("chain actions only"),
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `job partner-export, reason attempts-exhausted`, or `every dead letter`.
fn describe(f: &Filters, n: usize) -> String {
    let parts: Vec<String> = f
        .pairs()
        .into_iter()
        .map(|(k, v)| format!("{} {v}", k.replace('_', " ")))
        .collect();
    match (parts.is_empty(), n) {
        (true, 1) => "the one selected".into(),
        (true, _) => "every one selected".into(),
        (false, _) => parts.join(", "),
    }
}

/// Acts on a confirmed form: refused without this server's anti-forgery token.
pub async fn act(
    State(ui): State<Shared>,
    Form(form): Form<Vec<(String, String)>>,
) -> Result<Response, PageError> {
    let fields = Fields(form);
    if !ui.access.form_token_matches(fields.get("csrf")) {
        let page = html::refusal(
            "refused: this request changes state and does not carry this page's anti-forgery token (send it from the page's own confirmation form)",
        );
        return Ok((StatusCode::FORBIDDEN, page).into_response());
    }
    let action = fields.action()?;
    let Some(once) = fields.get("once").filter(|id| ui.confirmations.take(id)) else {
        let page = html::refusal(
            "refused: this confirmation was used already (or this server restarted since it was shown): nothing was done again; look at the page as it is now, and confirm again if there is still something to do",
        );
        return Ok((StatusCode::CONFLICT, page).into_response());
    };
    let once = once.to_string();
    // The dead-letter actions run their batches as lanes of one task (not `Send`): each
    // action runs on a blocking thread of its own, on this runtime.
    let runtime = tokio::runtime::Handle::current();
    let acted = {
        let (ui, action) = (ui.clone(), action.clone());
        tokio::task::spawn_blocking(move || runtime.block_on(perform(&ui, &action, &fields)))
            .await
            .map_err(|e| PageError::from(anyhow::anyhow!("the action stopped: {e}")))??
    };
    let back = match &action {
        Action::Pause { job } | Action::Resume { job } | Action::Fire { job } => {
            format!("/jobs/{}", html::encode_segment(job))
        }
        Action::Cancel { key } => html::href("/run", &[("key", key)]),
        Action::Rerun { key } | Action::ChainCancel { key } | Action::Skip { key, .. } => {
            html::href("/chain", &[("key", key)])
        }
        Action::Redrive { .. } | Action::Purge { .. } => "/dlq".into(),
    };
    ui.confirmations.keep(
        &once,
        Done {
            text: acted.text,
            back,
        },
    );
    // Sent to read the result: reloading it repeats nothing.
    Ok(Redirect::to(&html::href("/done", &[("id", &once)])).into_response())
}

#[derive(Debug, serde::Deserialize)]
pub struct DoneQuery {
    id: String,
}

/// What a confirmed action did.
pub async fn done(
    State(ui): State<Shared>,
    Query(q): Query<DoneQuery>,
) -> Result<Response, PageError> {
    let done = ui.confirmations.done(&q.id).ok_or_else(|| {
        PageError::not_found("this server has no result under that id (restarted since?)")
    })?;
    let body = html! {
        p.done role="status" { (done.text) }
        p { a.button href=(done.back) { "See it" } " " a href="/" { "Overview" } " " a href="/audit" { "Audit trail" } }
    };
    Ok(html::page(&ui.frame("Done", ""), body).into_response())
}

/// The command's own function for `action`, as `--yes` runs it.
async fn perform(ui: &Shared, action: &Action, fields: &Fields) -> Result<Acted, PageError> {
    let why = fields.get("why").unwrap_or("no reason given").to_string();
    let cli = &ui.globals;
    Ok(match action {
        Action::Pause { job } => {
            let why = fields.need("why")?;
            jobs_cmd::pause_or_resume(
                &jobs_cmd::JobsAction::Pause {
                    job: job.clone(),
                    reason: why,
                },
                cli,
            )
            .await?
        }
        Action::Resume { job } => {
            jobs_cmd::pause_or_resume(&jobs_cmd::JobsAction::Resume { job: job.clone() }, cli)
                .await?
        }
        Action::Fire { job } => fire_cmd::fire(&fire_cmd::FireArgs::now(job), cli).await?,
        Action::Cancel { key } => {
            let args = executions_cmd::CancelArgs {
                key: Some(key.clone()),
                job: None,
                status: Vec::new(),
                reason: why,
                yes: true,
            };
            executions_cmd::cancel(&args, cli, &ui.sdk, &ui.stage.table).await?
        }
        Action::Rerun { key } => {
            chains_cmd::rerun(
                &chains_cmd::RerunArgs {
                    key: key.clone(),
                    redrive: false,
                    yes: true,
                },
                cli,
            )
            .await?
        }
        Action::ChainCancel { key } => {
            chains_cmd::cancel(
                &chains_cmd::ChainCancelArgs {
                    key: key.clone(),
                    reason: why,
                    yes: true,
                },
                cli,
            )
            .await?
        }
        Action::Skip { key, step } => {
            let why = fields.need("why")?;
            let args = chains_cmd::SkipArgs {
                key: key.clone(),
                step: step.clone(),
                step_output: "{}".into(),
                reason: why,
                yes: true,
            };
            chains_cmd::skip(&args, cli).await?
        }
        Action::Redrive { filters, ids } | Action::Purge { filters, ids } => {
            if ids.is_empty() {
                return Err(PageError::bad(
                    "the confirmation named no dead letter: nothing done",
                ));
            }
            let args = filters.select_args(ids.clone());
            let (mut acted, handled) = if matches!(action, Action::Redrive { .. }) {
                let acted = dlq_cmd::redrive(&args, cli).await?;
                let n = acted.details["moved"].as_u64();
                (acted, n)
            } else {
                let acted = dlq_cmd::purge(&args, cli).await?;
                let n = acted.details["deleted"].as_u64();
                (acted, n)
            };
            if let Some(short) = shortfall(ids.len(), handled.unwrap_or(0) as usize) {
                acted.text = format!("{} — {short}", acted.text);
            }
            acted
        }
    })
}

/// What to say when fewer letters were handled than confirmed: a letter another reader
/// held at that moment (a second tab, `schedkit dlq list`, a redrive) is not found and
/// stays, and the operator must hear it rather than read only "redrove 2".
fn shortfall(confirmed: usize, handled: usize) -> Option<String> {
    let missing = confirmed.checked_sub(handled).filter(|n| *n > 0)?;
    Some(format!(
        "{missing} of the {confirmed} confirmed letter{} {} not found (held by another reader at that moment, or handled already); any still there stay in the DLQ: look again",
        plural(confirmed),
        if missing == 1 { "was" } else { "were" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewer_letters_handled_than_confirmed_is_said() {
        assert_eq!(shortfall(2, 2), None);
        assert_eq!(shortfall(0, 0), None);
        let one = shortfall(3, 2).unwrap();
        assert!(
            one.starts_with("1 of the 3 confirmed letters was not found"),
            "{one}"
        );
        let two = shortfall(2, 0).unwrap();
        assert!(
            two.starts_with("2 of the 2 confirmed letters were not found"),
            "{two}"
        );
    }
}
