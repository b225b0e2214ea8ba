//! The overview: what `schedkit status` says, as the first page (and it reloads itself);
//! and the help page.

use axum::extract::State;
use chrono::SecondsFormat;
use maud::{Markup, html};
use schedkit::ops::status::{self, StatusReport};

use super::html::{self, clip, job_link, run_link};
use super::page::Page;
use super::state::Shared;

/// Seconds between the overview's reloads.
const REFRESH_SECONDS: u32 = 30;

pub async fn page(State(ui): State<Shared>) -> Page {
    let report = status::gather(&ui.sdk, &ui.stage, &ui.catalog).await?;
    let mut frame = ui.frame("Overview", "/");
    frame.refresh = Some(REFRESH_SECONDS);
    Ok(html::page(&frame, body(&report)))
}

fn body(r: &StatusReport) -> Markup {
    let q = &r.queue;
    let age = r
        .oldest_message_age_seconds
        .map(|s| format!("{s:.0} s"))
        .unwrap_or_else(|| "n/a".into());
    let (missed, late) = r
        .accountant
        .as_ref()
        .map_or((0, 0), |a| (a.missed.len(), a.late.len()));
    html! {
        p.note { "Reloads every " (REFRESH_SECONDS) " seconds." }
        section.cards aria-label="at a glance" {
            (card("Jobs queue", &format!("{} waiting", q.visible),
                &format!("{} in flight, {} delayed; oldest {age}", q.in_flight, q.delayed), None, false))
            @if let Some(u) = &r.urgent_queue {
                (card("Urgent queue", &format!("{} waiting", u.visible),
                    &format!("{} in flight, {} delayed: runs of positive priority", u.in_flight, u.delayed), None, false))
            }
            (card("Dead letters", &r.dlq_depth.to_string(), "in the DLQ", Some("/dlq"), r.dlq_depth > 0))
            (card("Failing jobs", &r.failing_jobs.len().to_string(), "with FAILED runs", Some("#failing"), !r.failing_jobs.is_empty()))
            (card("Paused", &(r.paused.len() + r.paused_chains.len()).to_string(),
                &format!("{} jobs, {} chain runs", r.paused.len(), r.paused_chains.len()), Some("#paused"),
                !r.paused.is_empty() || !r.paused_chains.is_empty()))
            (card("Missed", &missed.to_string(), "firings with no run", Some("#accountant"), missed > 0))
            (card("Late", &late.to_string(), "runs past their deadline", Some("#accountant"), late > 0))
        }
        section #failing {
            h2 { "Failing jobs" }
            @if r.failing_jobs.is_empty() {
                p { "None." }
            } @else {
                table {
                    thead { tr { th { "Job" } th { "Failed runs" } th { "Last error" } th { "Dead letters" } } }
                    tbody { @for f in &r.failing_jobs {
                        tr.failing {
                            td { (job_link(&f.job)) }
                            td.num { (f.failed) }
                            td { (clip(&f.last_error, 120)) }
                            td { a href=(html::href("/dlq", &[("job", &f.job)])) { "its letters" } }
                        }
                    } }
                }
            }
        }
        section #paused {
            h2 { "Paused" }
            @if r.paused.is_empty() && r.paused_chains.is_empty() {
                p { "Nothing is paused." }
            }
            @if !r.paused_chains.is_empty() {
                table {
                    caption { "Chain runs paused after a step failed for good: fix the cause, then rerun from the failed step" }
                    thead { tr { th { "Chain run" } th { "Since" } th { "Why" } } }
                    tbody { @for c in &r.paused_chains {
                        tr.paused-chain {
                            td { a.key href=(html::href("/chain", &[("key", &c.key)])) { (c.key) } }
                            td { (c.at) }
                            td { (clip(&c.failed, 160)) }
                        }
                    } }
                }
            }
            @if !r.paused.is_empty() {
                table {
                    caption { "Jobs whose schedule is paused" }
                    thead { tr { th { "Job" } th { "Since" } th { "By" } th { "Why" } } }
                    tbody { @for p in &r.paused {
                        tr { td { (job_link(&p.job)) } td { (p.at) } td { (p.by) } td { (p.reason) } }
                    } }
                }
            }
        }
        (accountant(r))
        @if !r.limits.is_empty() {
            section #limits {
                h2 { "Limits" }
                table {
                    thead { tr { th { "Limit" } th { "Allows" } th { "In use" } th { "Waiting" } th { "Next start" } th { "Held back (5 min)" } th { "Jobs" } } }
                    tbody { @for l in &r.limits {
                        tr {
                            td { (l.limit) }
                            td { (l.concurrency.map(|n| match &l.per_key { Some(k) => format!("{n} per {k}"), None => format!("{n} at once") }).into_iter().chain(l.rate.clone()).collect::<Vec<_>>().join(", ")) }
                            td.num { (l.in_use.map(|n| n.to_string()).unwrap_or_else(|| "–".into())) }
                            td.line {
                                (l.line.as_ref().map(schedkit::ops::limits::describe_line).unwrap_or_else(|| "–".into()))
                                @if let Some(line) = l.line.as_ref().filter(|line| line.waiting > 0) {
                                    ul.shares { @for share in &line.shares { li { (schedkit::ops::limits::describe_share(share)) } } }
                                }
                            }
                            td { (l.next_start.as_deref().unwrap_or("–")) }
                            td.num { (l.held_back_5m.map(|n| format!("{n:.0}")).unwrap_or_else(|| "n/a".into())) }
                            td { (l.jobs.join(", ")) }
                        }
                    } }
                }
            }
        }
        @if !r.cancelled.is_empty() {
            section #cancelled {
                h2 { "Cancelled in the last day" }
                table {
                    thead { tr { th { "Run" } th { "Job" } th { "When" } th { "By" } th { "Why" } } }
                    tbody { @for c in &r.cancelled {
                        tr { td { (run_link(&c.key)) } td { (job_link(&c.job)) } td { (c.at) } td { (c.by) } td { (c.reason) } }
                    } }
                }
            }
        }
        (alarms(r))
        section #last-runs {
            h2 { "Each job's last run" }
            @if r.jobs_page.pages > 1 {
                p.note { "The first " (r.jobs.len()) " of " (r.jobs_page.total) " jobs: "
                    a href="/jobs?page=2" { "the others, a page at a time" } "." }
            }
            table {
                thead { tr { th { "Job" } th { "Scheduled for" } th { "Status" } th { "Attempts" } th { "Updated" } } }
                tbody { @for j in &r.jobs {
                    tr {
                        td { (job_link(&j.job)) }
                        td { (j.scheduled_for.as_deref().unwrap_or("never")) }
                        td { (html::maybe_status(j.status)) }
                        td.num { (j.attempt.map(|a| a.to_string()).unwrap_or_else(|| "–".into())) }
                        td { (j.updated_at.as_deref().unwrap_or("–")) }
                    }
                } }
            }
        }
    }
}

/// The stage's alarms in ALARM, each with the jobs it names.
fn alarms(r: &StatusReport) -> Markup {
    html! {
        section #alarms {
            h2 { "Alarms" }
            @match &r.alarms {
                None => p { "CloudWatch could not be read." },
                Some(a) if a.in_alarm.is_empty() => p { "None in ALARM (" (a.watched) " watched)." },
                Some(a) => table {
                    thead { tr { th { "Alarm" } th { "Jobs it names" } th { "Why" } } }
                    tbody { @for alarm in &a.in_alarm {
                        tr.in-alarm {
                            td { (alarm.alarm) }
                            td { @for (i, job) in alarm.jobs.iter().enumerate() {
                                @if i > 0 { ", " } (job_link(job))
                            } }
                            td { (clip(&alarm.reason, 160)) }
                        }
                    } }
                },
            }
        }
    }
}

/// Missed and late firings the overview lists one by one; the rest are counted.
const FINDINGS_LISTED: usize = 50;

/// The accountant's last word: missed firings and late runs.
fn accountant(r: &StatusReport) -> Markup {
    let at = |t: &chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    html! {
        section #accountant {
            h2 { "Missed and late" }
            @match &r.accountant {
                None => p { "The accountant has not checked this stage yet." },
                Some(a) => {
                    p { "Last checked " (a.checked_at.as_ref().map(at).unwrap_or_else(|| "never".into())) ": "
                        (a.missed.len()) " missed, " (a.late.len()) " late." }
                    @if !a.missed.is_empty() || !a.late.is_empty() {
                        table {
                            thead { tr { th { "Finding" } th { "Job" } th { "Run" } th { "Due" } th { "Status" } } }
                            tbody {
                                @for f in a.missed.iter().take(FINDINGS_LISTED) {
                                    tr.missed { td { "missed" } td { (job_link(&f.name)) } td { (f.key) } td { (at(&f.scheduled_for)) } td { "no run" } }
                                }
                                @for f in a.late.iter().take(FINDINGS_LISTED) {
                                    tr.late { td { "late" } td { (job_link(&f.name)) } td { (run_link(&f.key)) } td { "DONE by " (at(&f.due_by)) } td { (html::maybe_status(f.status)) } }
                                }
                            }
                        }
                        @let more = a.missed.len().saturating_sub(FINDINGS_LISTED) + a.late.len().saturating_sub(FINDINGS_LISTED);
                        @if more > 0 {
                            p.note { "And " (more) " more: " a href="/executions?status=" { "the executions" } ", or " code { "schedkit executions list --missed" } "." }
                        }
                    }
                }
            }
        }
    }
}

/// One figure with its label; `alert` marks it as needing an operator.
fn card(title: &str, figure: &str, detail: &str, link: Option<&str>, alert: bool) -> Markup {
    let class = if alert { "card alert" } else { "card" };
    html! {
        div class=(class) {
            h2 { (title) }
            @match link {
                Some(to) => p.figure { a href=(to) { (figure) } },
                None => p.figure { (figure) },
            }
            p { (detail) }
        }
    }
}

/// How to use the page: the keys, what each page shows, what the actions do.
pub async fn help(State(ui): State<Shared>) -> Page {
    Ok(html::page(
        &ui.frame("Help", "/help"),
        html! {
            p { "This page reads stage " strong { (ui.stage.stage) } " through the same calls as the "
                code { "schedkit" } " commands, and acts through the same commands: every action asks first on a page that says what will change, and is written to the stage's audit trail as this server's AWS identity." }
            dl {
                dt { "Overview" } dd { "The jobs queue, the dead letters, failing and paused jobs, paused chain runs, missed and late runs (" code { "schedkit status" } ")." }
                dt { "Jobs" } dd { "The catalog: next runs in the job's zone and in UTC, success rate and a strip of the last 20 runs; a job's page draws its runs on a time line." }
                dt { "Executions" } dd { "Records by job, status and time, a page at a time (" code { "schedkit executions list" } "); a run's page shows its attempts, errors, input, result, lease and trace id." }
                dt { "Chains" } dd { "Chain runs; a run drawn as its stages, parallel steps side by side; rerun a paused run from its failed step." }
                dt { "Dead letters" } dd { "Filter by job, reason and age; redrive or purge what the filter selects, after a page that names how many." }
                dt { "Audit" } dd { "Who did what, and when, on this stage." }
            }
            p { "Every control is a link or a button: Tab moves between them, Enter follows." }
        },
    ))
}
