//! `schedkit fire JOB`: run a job (or start a chain) now or later, with the envelope a
//! schedule would send.

use anyhow::Context;
use chrono::{SecondsFormat, Utc};
use clap::Args;
use schedkit::catalog::RunsOn;
use schedkit::ops::executions::Records;
use schedkit::ops::{audit, stage};
use schedkit::trigger::one_off::{self, Enqueued, OneOffTarget};
use schedkit::trigger::sync;
use schedkit::{Envelope, Status};
use serde_json::{Map, Value};

use super::{
    globals::Globals, globals::load_catalog, globals::parse_instant, globals::stage_group,
    output::Acted, output::Output, usage::UsageError,
};

#[derive(Debug, Args)]
pub struct FireArgs {
    /// A job or a chain of the catalog.
    pub job: String,
    /// The payload, a JSON object (default: the catalog's payload for the job).
    #[arg(long)]
    pub payload: Option<String>,
    /// An explicit execution key (default: the job's key template, else <job>#<time>).
    #[arg(long)]
    pub key: Option<String>,
    /// This run's priority for a freed permit of its limits, over the job's (-10 to 10,
    /// higher first): an urgent run starts before those already waiting.
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(-10..=10))]
    pub priority: Option<i32>,
    /// Run at this instant (RFC 3339).
    #[arg(long, conflicts_with = "delay")]
    pub at: Option<String>,
    /// Run after this delay (90s, 15m, 2h, 1d).
    #[arg(long = "in", value_name = "DELAY")]
    pub delay: Option<String>,
    /// The schedule group (default: the catalog's); one-time schedules go to `<group>-once`.
    #[arg(long)]
    pub group: Option<String>,
    /// The role EventBridge Scheduler assumes, for runs more than 15 minutes ahead
    /// (default: the one the stage's stack tagged its schedule group with).
    #[arg(long, env = "SCHEDKIT_SCHEDULER_ROLE_ARN")]
    pub role_arn: Option<String>,
    /// Where the scheduler puts a one-time firing it cannot deliver (default: the stage's
    /// schedule dead-letter queue, likewise).
    #[arg(long, env = "SCHEDKIT_SCHEDULE_DLQ_ARN")]
    pub dead_letter_arn: Option<String>,
}

impl FireArgs {
    /// A run of `job` now, as `schedkit fire JOB` with no other flag.
    pub fn now(job: &str) -> FireArgs {
        FireArgs {
            job: job.to_string(),
            payload: None,
            key: None,
            priority: None,
            at: None,
            delay: None,
            group: None,
            role_arn: None,
            dead_letter_arn: None,
        }
    }
}

pub async fn run(a: &FireArgs, cli: &Globals) -> anyhow::Result<()> {
    let acted = fire(a, cli).await?;
    match cli.output {
        // One line, as a script reads it.
        Output::Json => println!("{}", acted.details),
        Output::Table => println!("{}", acted.text),
    }
    Ok(())
}

/// Enqueues (or schedules) the run, audited; what it did, for the console to print and
/// the web page to show.
pub(crate) async fn fire(a: &FireArgs, cli: &Globals) -> anyhow::Result<Acted> {
    let catalog = load_catalog(cli)?;
    // A job, or a chain: a chain's run is its trigger on the jobs queue, which the worker
    // turns into one execution named after the key.
    let (name, default_payload, template, runs_on, spec_priority) = match catalog.chain(&a.job) {
        Some(chain) => (
            chain.name.clone(),
            chain.payload(),
            None,
            RunsOn::Lambda,
            chain.spec.priority,
        ),
        None => {
            let job = super::globals::catalog_job(&catalog, &a.job)?;
            (
                job.name.clone(),
                job.payload(),
                job.policy.key_template.clone(),
                job.spec.runs_on,
                job.spec.priority,
            )
        }
    };
    let now = Utc::now();
    let at = match (&a.at, &a.delay) {
        (Some(at), _) => parse_instant(at).map_err(UsageError)?,
        (None, Some(delay)) => {
            let d = humantime::parse_duration(delay)
                .map_err(|e| UsageError(format!("--in `{delay}`: {e}")))?;
            chrono::Duration::from_std(d)
                .ok()
                .and_then(|d| now.checked_add_signed(d))
                .ok_or_else(|| UsageError(format!("--in `{delay}` is too far ahead")))?
        }
        (None, None) => now,
    };
    let payload: Map<String, Value> = match &a.payload {
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(UsageError("--payload must be a JSON object".into()).into()),
            Err(e) => return Err(UsageError(format!("--payload is not JSON: {e}")).into()),
        },
        None => default_payload,
    };
    let mut envelope = Envelope::new(name.clone(), at);
    // A chain's runs and their steps live in its own key space (`<chain>#…`), and no job's
    // run may: the worker refuses either out of place.
    envelope.key = match (&a.key, catalog.chain(&a.job)) {
        (Some(k), Some(_)) if !k.starts_with(&format!("{name}#")) => Some(format!("{name}#{k}")),
        (Some(k), None) => {
            if let Some((chain, _)) = k
                .split_once('#')
                .filter(|(c, _)| catalog.chain(c).is_some())
            {
                return Err(UsageError(format!(
                    "--key `{k}` lies in chain `{chain}`'s key space (its runs and their steps): give the job another key"
                ))
                .into());
            }
            Some(k.clone())
        }
        (key, _) => key.clone(),
    };
    envelope.payload = (!payload.is_empty()).then_some(payload);
    envelope.priority = a.priority;
    // The worker would reject what the key template cannot fill: say so now instead.
    let key = schedkit::key::execution_key(&envelope, template.as_ref())
        .map_err(|e| UsageError(e.to_string()))?;
    audit::ensure_writable()?;

    let sdk = cli.aws.sdk_config().await;
    // A cancelled run stays cancelled: the worker would acknowledge this firing unrun.
    let table = cli.target.stage_ref().table();
    if let Ok(Some(r)) = Records::new(&sdk, &table).get(&key).await
        && let Some(c) = r
            .cancelled
            .as_ref()
            .filter(|_| r.status == Status::Cancelled)
    {
        return Err(UsageError(format!(
            "run `{key}` was CANCELLED by {} at {} ({}): a cancelled run is never run again under its key, so this firing would be acknowledged unrun; to do the work now, fire it under a new key (--key {key}-again)",
            c.by, c.at, c.reason
        ))
        .into());
    }
    let far = one_off::needs_schedule(at, now);
    let group = a
        .group
        .clone()
        .unwrap_or_else(|| stage_group(&catalog, cli));
    // The stage's wiring, as its stack tagged the schedule group: the role and the
    // dead-letter queue a one-time schedule needs, so it is never sent without its DLQ.
    let wiring = sync::stage_targets(&sync::client(&sdk), &group)
        .await
        .context("reading the stage's schedule group")?;
    let role_arn = match (&a.role_arn, &wiring, far) {
        (Some(r), _, _) => r.clone(),
        (None, Some(w), _) => w.role_arn.clone(),
        (None, None, false) => String::new(),
        (None, None, true) => return Err(UsageError(format!("a run more than 15 minutes ahead becomes a one-time schedule, and schedule group {group} names no scheduler role (deploy the stage, or give --role-arn)")).into()),
    };
    // A host job's runs go to the host jobs queue, which the function does not read.
    let queue_url = cli
        .target
        .stage_ref()
        .queue_url_of(&sdk, runs_on)
        .await
        .map_err(|e| super::target::usage_if_not_found(e, &cli.target))?;
    // An urgent run skips the jobs queue's backlog (see schedkit::queue::urgent).
    let priority = a.priority.or(spec_priority).unwrap_or(0);
    let queue_url = stage::queue_for_priority(&sdk, &queue_url, priority).await?;
    let queue_arn = stage::queue_arn(&sdk, &queue_url).await?;
    let target = OneOffTarget {
        queue_url: queue_url.clone(),
        queue_arn,
        role_arn,
        group,
        dead_letter_arn: a
            .dead_letter_arn
            .clone()
            .or_else(|| wiring.and_then(|w| w.dead_letter_arn)),
    };
    let when = at.to_rfc3339_opts(SecondsFormat::Secs, true);
    let audited = audit::begin(
        &sdk,
        "fire",
        serde_json::json!({"job": name, "scheduled_for": when, "key": envelope.key, "queue": queue_url}),
    )
    .await?;
    // The trigger's span in the run's trace (when traces are on): its deliveries hang
    // under it.
    let trigger = schedkit::telemetry::traces::trigger(&format!("fire {name}"), &key, &key);
    let group = message_group(&catalog, &envelope);
    let sent_with = (trigger.as_ref(), group.as_deref());
    let enqueued = one_off::enqueue_traced(&sdk, &target, &envelope, now, sent_with).await;
    audited
        .end(&enqueued.as_ref().map(|e| format!("{e:?}")), None)
        .await;
    let enqueued = enqueued?;
    let job = &name;
    Ok(match &enqueued {
        Enqueued::Queued {
            message_id,
            delay_seconds,
        } => Acted {
            text: format!(
                "{job} queued for {when} (message {message_id}, visible in {delay_seconds} s)"
            ),
            details: serde_json::json!({"job": job, "scheduled_for": when, "queued": {"message_id": message_id, "delay_seconds": delay_seconds}}),
        },
        Enqueued::Scheduled { group, name } => Acted {
            text: format!(
                "{job} scheduled for {when} (one-time schedule {group}/{name}, deleted after it fires)"
            ),
            details: serde_json::json!({"job": job, "scheduled_for": when, "schedule": {"group": group, "name": name}}),
        },
    })
}

/// The run's `MessageGroupId` for SQS's fair queues: its job's fair share (see
/// `schedkit::flow::message_group`); a chain's run is its chain's group.
fn message_group(catalog: &schedkit::catalog::Catalog, envelope: &Envelope) -> Option<String> {
    match catalog.jobs.get(&envelope.job) {
        Some(job) => job
            .policy
            .flow
            .message_group(&job.name, envelope.payload.as_ref()),
        None => Some(schedkit::flow::sqs_group(&envelope.job)),
    }
}
