//! Reading and checking a catalog. Every rule names the job and the field it is about.

use std::collections::BTreeMap;

use serde_path_to_error::Segment;

use super::chains::check_chains;
use super::error::{CatalogError, CatalogErrors};
use super::inventory::{Catalog, Job, Target, policy};
use super::limits;
use super::model::{
    CHAINS_MAX, CatalogFile, CommandSpec, HOST_TIMEOUT_MAX_SECONDS, JobSpec, OWN_ALARMS_MAX,
    RetrySpec, RunsOn, SCHEDULED_MAX, SECRETS_MAX, ScheduleSpec, Settings,
};
use super::rules::{check_schedule, name_rule, valid_name};
use crate::key::KeyTemplate;
use crate::retry::MAX_VISIBILITY;
use crate::schedule::{Schedule, ScheduleExpression};

/// Parses the TOML into the model; syntax and shape errors become catalog errors.
pub(super) fn deserialize(text: &str, file: &str) -> Result<CatalogFile, CatalogErrors> {
    let error = |job: Option<String>, field: Option<String>, message: String| {
        CatalogErrors(vec![CatalogError {
            file: file.to_string(),
            job,
            chain: None,
            field,
            message,
        }])
    };
    let line_of = |span: Option<std::ops::Range<usize>>| {
        span.map(|s| text[..s.start.min(text.len())].lines().count().max(1))
    };
    let deserializer = toml::Deserializer::parse(text).map_err(|e| {
        let line = line_of(e.span())
            .map(|l| format!("line {l}: "))
            .unwrap_or_default();
        // The text the error points at, e.g. the key a duplicate table repeats.
        let at = e
            .span()
            .and_then(|s| text.get(s))
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= 80 && !s.contains('\n'))
            .map(|s| format!(" `{s}`"))
            .unwrap_or_default();
        error(None, None, format!("{line}{}{at}", e.message().trim_end()))
    })?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let segments: Vec<String> = e
            .path()
            .iter()
            .filter_map(|s| match s {
                Segment::Map { key } => Some(key.clone()),
                Segment::Seq { index } => Some(index.to_string()),
                Segment::Enum { variant } => Some(variant.clone()),
                Segment::Unknown => None,
            })
            .collect();
        let inner = e.into_inner();
        let message = inner.message().trim_end().to_string();
        let rest = |rest: &[String]| (!rest.is_empty()).then(|| rest.join("."));
        let (job, chain, field) = match segments.as_slice() {
            [first, job, tail @ ..] if first == "jobs" => (Some(job.clone()), None, rest(tail)),
            [first, chain, tail @ ..] if first == "chains" => {
                (None, Some(chain.clone()), rest(tail))
            }
            [] => (None, None, None),
            all => (None, None, Some(all.join("."))),
        };
        let mut e = error(job, field, message);
        e.0[0].chain = chain;
        e
    })
}

/// What the checks found: errors (the catalog is refused) and warnings (it is not).
struct Findings<'f> {
    file: &'f str,
    errors: Vec<CatalogError>,
    warnings: Vec<CatalogError>,
}

impl Findings<'_> {
    fn finding(&self, job: Option<&str>, field: &str, message: String) -> CatalogError {
        CatalogError {
            file: self.file.to_string(),
            job: job.map(str::to_owned),
            chain: None,
            field: Some(field.to_string()),
            message,
        }
    }

    fn fail(&mut self, job: Option<&str>, field: &str, message: String) {
        let e = self.finding(job, field, message);
        self.errors.push(e);
    }

    fn warn(&mut self, job: Option<&str>, field: &str, message: String) {
        let e = self.finding(job, field, message);
        self.warnings.push(e);
    }
}

/// Checks every rule and builds the validated catalog.
pub(super) fn validate(raw: CatalogFile, file: &str) -> Result<Catalog, CatalogErrors> {
    let mut found = Findings {
        file,
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    let now = chrono::Utc::now();
    check_settings(&raw.settings, &mut found);
    let mut limit_errors = Vec::new();
    let mut report = |job: Option<&str>, field: String, message: String| {
        limit_errors.push(limits::finding(file, job, field, message));
    };
    let shared_limits = limits::check_limits(&raw.limits, &mut report);
    let mut job_limits = BTreeMap::new();
    for (name, spec) in &raw.jobs {
        let checked = limits::check_job_limits(name, spec, &raw.limits, &raw.settings, &mut report);
        job_limits.insert(name.clone(), checked);
    }
    let mut checked = Vec::new();
    check_budgets(&raw, &mut found);
    for (name, spec) in &raw.jobs {
        check_job(name, spec, &raw.settings, &mut found);
        let template = check_key_template(name, spec, &mut found);
        let schedule = spec
            .schedule
            .as_ref()
            .and_then(|sched| job_schedule(name, spec, sched, template.as_ref(), now, &mut found));
        checked.push((name, spec, Target::Queue, schedule));
    }
    let Findings {
        mut errors,
        mut warnings,
        ..
    } = found;
    errors.extend(limit_errors);
    let chains = check_chains(
        &raw.chains,
        &raw.jobs,
        &raw.settings,
        file,
        now,
        &mut errors,
        &mut warnings,
    );
    if !errors.is_empty() {
        return Err(CatalogErrors(errors));
    }
    // Only now: building a policy relies on the checks above.
    let jobs = checked
        .into_iter()
        .map(|(name, spec, target, schedule)| {
            let limits = job_limits.remove(name).unwrap_or_default();
            let mut policy = policy(spec, &raw.settings);
            policy.flow = limits.flow(&shared_limits);
            let job = Job {
                name: name.clone(),
                spec: spec.clone(),
                target,
                policy,
                schedule,
                limits,
            };
            (name.clone(), job)
        })
        .collect();
    Ok(Catalog {
        file: file.to_string(),
        settings: raw.settings,
        jobs,
        chains: chains.into_iter().map(|c| (c.name.clone(), c)).collect(),
        limits: shared_limits,
        warnings,
    })
}

/// The `[settings]` table: names and AWS's limits.
fn check_settings(s: &Settings, found: &mut Findings<'_>) {
    if !valid_name(&s.schedule_group) {
        found.fail(
            None,
            "settings.schedule_group",
            name_rule(&s.schedule_group),
        );
    }
    if !(1..=900).contains(&s.function_timeout_seconds) {
        found.fail(
            None,
            "settings.function_timeout_seconds",
            "must be 1-900 (Lambda's limit)".into(),
        );
    }
    if !(1..=14).contains(&s.queue_retention_days) || !(1..=14).contains(&s.dlq_retention_days) {
        found.fail(
            None,
            "settings.queue_retention_days",
            "queue and DLQ retention must each be 1-14 days (SQS's limit)".into(),
        );
    }
}

/// The characters of the worker role's inline policies the secrets' grant may take: IAM
/// allows 10,240 for a role's inline policies together (whitespace not counted), and the
/// worker's own, the pause grant and the chains' take about 3,500.
const SECRETS_POLICY_CHARS: usize = 6_500;

/// The secrets' grant's length as IAM counts it, its ARNs at their longest (the partition
/// `aws-us-gov`, a 14-character Region, a 12-digit account) and each with its quotes and
/// comma, plus the two statements around them.
fn secrets_policy_chars(sources: &std::collections::BTreeSet<&str>) -> usize {
    let arns: usize = sources
        .iter()
        .filter_map(|source| crate::secrets::resource(source))
        .map(|arn| {
            arn.replace("${AWS::Partition}", "aws-us-gov")
                .replace("${AWS::Region}", "ap-southeast-4")
                .replace("${AWS::AccountId}", "123456789012")
                .len()
                + 3
        })
        .sum();
    arns + 200
}

/// What the stack holds per job or chain, whatever the catalog's size: a few alarms of
/// jobs' own, and a state machine and an alarm per chain.
fn check_budgets(raw: &CatalogFile, found: &mut Findings<'_>) {
    check_resource_ids(raw, found);
    let sources: std::collections::BTreeSet<&str> = raw
        .jobs
        .values()
        .flat_map(|j| j.secrets.values().map(String::as_str))
        .collect();
    if sources.len() > SECRETS_MAX {
        found.fail(
            None,
            "secrets",
            format!(
                "{} distinct secrets, at most {SECRETS_MAX}: the worker's policy names each",
                sources.len()
            ),
        );
    }
    let policy = secrets_policy_chars(&sources);
    if policy > SECRETS_POLICY_CHARS {
        found.fail(
            None,
            "secrets",
            format!(
                "the {} secrets' ARNs take about {policy} characters of the worker role's inline policies (IAM allows 10,240 in all, {SECRETS_POLICY_CHARS} of them for secrets): list fewer, or shorter names",
                sources.len()
            ),
        );
    }
    if !(1..=86_400).contains(&raw.settings.secrets_max_age_seconds) {
        found.fail(
            None,
            "settings.secrets_max_age_seconds",
            "must be 1-86400 (a day)".into(),
        );
    }
    let own: Vec<&str> = raw
        .jobs
        .iter()
        .filter(|(_, j)| j.own_alarm)
        .map(|(name, _)| name.as_str())
        .collect();
    if own.len() > OWN_ALARMS_MAX {
        found.fail(
            Some(own[OWN_ALARMS_MAX]),
            "own_alarm",
            format!(
                "{} jobs ask for an alarm of their own, at most {OWN_ALARMS_MAX} may (the stage's failed alarm already names every failing job, each as a contributor; keep own alarms for the jobs that page someone else)",
                own.len()
            ),
        );
    }
    let scheduled = raw.jobs.values().filter(|j| j.schedule.is_some()).count()
        + raw.chains.values().filter(|c| c.schedule.is_some()).count();
    // A warning, not a refusal: workers run a catalog past it (their jobs are not the
    // accountant's), and with short names the ledger holds more.
    if scheduled > SCHEDULED_MAX {
        found.warn(
            None,
            "schedule",
            format!(
                "{scheduled} scheduled jobs and chains, more than {SCHEDULED_MAX}: the accountant keeps one entry for each in its ledger, one DynamoDB item of at most 400 KB, and past about 2,700 with names of 64 characters its checks can no longer write it (fire the rest with `schedkit fire`, or split the catalog into stages)"
            ),
        );
    }
    if raw.chains.len() > CHAINS_MAX {
        found.fail(
            None,
            "chains",
            format!(
                "{} chains, at most {CHAINS_MAX}: each is a state machine and an alarm in the stage's stack, which CloudFormation caps at 500 resources",
                raw.chains.len()
            ),
        );
    }
}

/// The stack's resources named after a job or a chain (a job's own alarm, a chain's state
/// machine and alarm) take a CloudFormation id made of the name's letters and digits:
/// `nightly-export` and `nightly_export` would both be `NightlyExport`, and the template
/// would not deploy. Refused here, naming both.
fn check_resource_ids(raw: &CatalogFile, found: &mut Findings<'_>) {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let own = raw
        .jobs
        .iter()
        .filter(|(_, j)| j.own_alarm)
        .map(|(name, _)| {
            (
                format!("job `{name}`"),
                format!("OwnFailedAlarm{}", super::rules::logical_id(name)),
            )
        });
    let chains = raw.chains.keys().map(|name| {
        (
            format!("chain `{name}`"),
            format!("Chain{}", super::rules::logical_id(name)),
        )
    });
    for (what, id) in own.chain(chains) {
        if let Some(first) = seen.get(&id) {
            found.fail(
                None,
                "name",
                format!(
                    "{first} and {what} have the same resource id in the stack (`{id}`: the name's letters and digits); rename one"
                ),
            );
        } else {
            seen.insert(id, what);
        }
    }
}

/// A job's name, owner, target and automatic pause, then its time limits and retries.
fn check_job(name: &str, spec: &JobSpec, s: &Settings, found: &mut Findings<'_>) {
    let job = Some(name);
    if let Some(text) = &spec.deadline {
        let budget = super::deadlines::spec_attempt_budget(spec, s);
        let window = super::deadlines::window(
            spec.schedule
                .as_ref()
                .map(|sched| sched.flexible_window_minutes),
        );
        if let Err(e) = super::deadlines::check_with_window(text, budget, window) {
            found.fail(job, "deadline", e);
        }
    }
    if !valid_name(name) {
        found.fail(job, "name", name_rule(name));
    }
    if let Some(handler) = &spec.handler
        && !valid_name(handler)
    {
        found.fail(job, "handler", name_rule(handler));
    }
    if spec.owner.trim().is_empty() {
        found.fail(
            job,
            "owner",
            "must name who to ask when the job fails".into(),
        );
    }
    match spec.target.as_str() {
        "queue" => {}
        t => match t.strip_prefix("chain:") {
            Some(chain) => found.fail(
                job,
                "target",
                format!(
                    "`{t}`: a chain is declared as `[chains.{chain}]` (stages of queue jobs, and its own schedule), and `schedkit fire {chain}` starts it; a job's target is `queue`"
                ),
            ),
            None => found.fail(job, "target", format!("`{t}` is not `queue`")),
        },
    }
    if let Some(message) = spec.pause_after_failures.and_then(|n| pause_rule(spec, n)) {
        found.fail(job, "pause_after_failures", message);
    }
    check_times(name, spec, s, found);
    check_retry(name, &spec.retry, found);
    if let Some(command) = &spec.command {
        check_command(name, spec, command, found);
    }
    for (secret, source) in &spec.secrets {
        if let Some(problem) = env_name_problem(secret) {
            found.fail(job, "secrets", format!("`{secret}` {problem}"));
        }
        if let Err(e) = crate::secrets::parse(source) {
            found.fail(job, "secrets", e);
        }
    }
}

/// Why `name` cannot be a variable of a command's environment the catalog sets: not a
/// name a shell takes, or one of the run's own (`SCHEDKIT_*`, which would be overridden).
fn env_name_problem(name: &str) -> Option<&'static str> {
    let shaped = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !shaped {
        Some(
            "must be a name a process's environment takes (letters, digits and `_`, not first a digit)",
        )
    } else if name.starts_with("SCHEDKIT_") {
        Some("is one of the run's own variables (`SCHEDKIT_*`): name it otherwise")
    } else {
        None
    }
}

/// A command job's command: something to run, exit codes a process can return, and no
/// Rust implementation named beside it.
fn check_command(name: &str, spec: &JobSpec, command: &CommandSpec, found: &mut Findings<'_>) {
    let job = Some(name);
    if command.run.trim().is_empty() {
        found.fail(job, "command.run", "must be the command line to run".into());
    }
    if command.shell.trim().is_empty() {
        found.fail(
            job,
            "command.shell",
            "must name the shell that runs the command (`/bin/sh`)".into(),
        );
    }
    if let Some(code) = command
        .permanent_exit_codes
        .iter()
        .find(|c| !(1..=255).contains(*c))
    {
        found.fail(
            job,
            "command.permanent_exit_codes",
            format!("{code} is not an exit code a process can fail with (1-255)"),
        );
    }
    for (variable, value) in &command.env {
        if let Some(problem) = env_name_problem(variable) {
            found.fail(job, "command.env", format!("`{variable}` {problem}"));
        }
        if value.contains('\0') {
            found.fail(
                job,
                "command.env",
                format!("`{variable}`: a value may not hold a NUL character"),
            );
        }
    }
    if command.grace_seconds > 300 {
        found.fail(
            job,
            "command.grace_seconds",
            format!(
                "{} s: at most 300 s between SIGTERM and SIGKILL",
                command.grace_seconds
            ),
        );
    }
    if let Some(handler) = &spec.handler {
        found.fail(
            job,
            "handler",
            format!("`{handler}`: a job runs either its command or a handler, not both"),
        );
    }
}

/// A job's lease, heartbeat, timeout and record retention against the function's and the
/// queues' limits.
fn check_times(name: &str, spec: &JobSpec, s: &Settings, found: &mut Findings<'_>) {
    let job = Some(name);
    let limit = spec.timeout_limit(s);
    let (bound, hint, runner) = match spec.runs_on {
        RunsOn::Lambda => (
            format!("the function timeout ({limit} s, settings.function_timeout_seconds)"),
            format!(
                "; a job that runs longer runs on the polling workers: runs_on = \"host\" (up to {HOST_TIMEOUT_MAX_SECONDS} s)"
            ),
            "function",
        ),
        RunsOn::Host => (
            format!("a host job's limit ({limit} s)"),
            ": SQS keeps a received message at most 12 hours".to_string(),
            "worker",
        ),
    };
    if spec.lease_seconds == 0 || spec.lease_seconds > limit {
        found.fail(
            job,
            "lease_seconds",
            format!(
                "{} s is longer than {bound}; a lease must end when the {runner} can no longer be running",
                spec.lease_seconds
            ),
        );
    }
    if let Some(h) = spec.heartbeat_seconds
        && (h == 0 || h >= spec.lease_seconds)
    {
        found.fail(
            job,
            "heartbeat_seconds",
            format!(
                "{h} s must be shorter than the lease ({} s)",
                spec.lease_seconds
            ),
        );
    }
    if let Some(t) = spec.timeout_seconds
        && (t == 0 || t > limit)
    {
        found.fail(
            job,
            "timeout_seconds",
            format!("{t} s exceeds {bound}{hint}"),
        );
    }
    if let Some(days) = spec.record_retention_days {
        let needed = s.queue_retention_days + s.dlq_retention_days;
        if days < needed {
            found.fail(
                job,
                "record_retention_days",
                format!(
                    "{days} days is shorter than queue + DLQ retention ({} + {} days): a duplicate could arrive after its record expired and run again",
                    s.queue_retention_days, s.dlq_retention_days
                ),
            );
        }
    }
}

/// A job's retry policy against SQS's visibility limit.
fn check_retry(name: &str, r: &RetrySpec, found: &mut Findings<'_>) {
    let job = Some(name);
    if r.max_attempts == 0 {
        found.fail(job, "retry.max_attempts", "must be at least 1".into());
    }
    let max_visibility = MAX_VISIBILITY.as_secs() as u32;
    if r.max_delay_seconds > max_visibility {
        found.fail(
            job,
            "retry.max_delay_seconds",
            format!(
                "{} s exceeds SQS's 12-hour visibility limit ({max_visibility} s)",
                r.max_delay_seconds
            ),
        );
    }
    if r.first_delay_seconds > r.max_delay_seconds || r.base_delay_seconds > r.max_delay_seconds {
        found.fail(
            job,
            "retry.max_delay_seconds",
            "must not be below first_delay_seconds or base_delay_seconds".into(),
        );
    }
}

/// A job's key template, when it has a usable one.
fn check_key_template(name: &str, spec: &JobSpec, found: &mut Findings<'_>) -> Option<KeyTemplate> {
    let job = Some(name);
    match spec
        .key_template
        .as_deref()
        .map(str::parse::<KeyTemplate>)?
    {
        Err(e) => {
            found.fail(job, "key_template", e.to_string());
            None
        }
        Ok(t)
            if t.literal_prefix()
                .starts_with(crate::store::INTERNAL_PREFIX) =>
        {
            found.fail(
                job,
                "key_template",
                format!(
                    "`{t}` starts with `{}`, which is reserved for schedkit's own items: every run would be rejected as poison",
                    crate::store::INTERNAL_PREFIX
                ),
            );
            None
        }
        Ok(t) => Some(t),
    }
}

/// A job's schedule, checked, and its key template against what a scheduled run carries.
fn job_schedule(
    name: &str,
    spec: &JobSpec,
    sched: &ScheduleSpec,
    template: Option<&KeyTemplate>,
    now: chrono::DateTime<chrono::Utc>,
    found: &mut Findings<'_>,
) -> Option<Schedule> {
    let job = Some(name);
    let schedule = check_schedule(sched, now, &mut |warning, field, message| {
        if warning {
            found.warn(job, field, message);
        } else {
            found.fail(job, field, message);
        }
    });
    // A scheduled run carries the catalog payload: the key template must find its fields.
    if let Some(t) = template
        && let Err(e) = t.render(spec.payload.as_ref())
    {
        found.fail(
            job,
            "key_template",
            format!("{e}: every scheduled run would be rejected as poison"),
        );
    }
    let schedule = schedule?;
    if template.is_some() && !schedule.expression.is_one_time() {
        found.fail(
            job,
            "key_template",
            format!(
                "with the recurring schedule {}, every firing carries the same payload and so the same key: all but the first would be skipped as duplicates (without a template the key is <job>#<scheduled_for>)",
                schedule.expression
            ),
        );
    }
    Some(schedule)
}

/// What is contradictory about `pause_after_failures = n` for this job, if anything: it
/// pauses a recurring schedule of a job the worker runs.
fn pause_rule(spec: &JobSpec, n: u32) -> Option<String> {
    if n == 0 {
        return Some("must be at least 1 (omit it to never pause)".into());
    }
    match &spec.schedule {
        None => {
            Some("pauses the job's schedule, and the job has none (it only runs when fired)".into())
        }
        Some(s)
            if s.expression
                .parse::<ScheduleExpression>()
                .is_ok_and(|e| e.is_one_time()) =>
        {
            Some(format!(
                "pauses the job's schedule, and {} fires once: there is no later firing to stop",
                s.expression
            ))
        }
        Some(_) => None,
    }
}
