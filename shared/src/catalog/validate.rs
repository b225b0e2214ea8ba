//! Reading and checking a catalog. Every rule names the job and the field it is about.

use serde_path_to_error::Segment;

use super::model::CatalogFile;
use super::{Catalog, CatalogError, CatalogErrors, Job, Target, policy};
use crate::key::KeyTemplate;
use crate::retry::MAX_VISIBILITY;
use crate::schedule::{Schedule, ScheduleExpression, parse_timezone};

/// Parses the TOML into the model; syntax and shape errors become catalog errors.
pub(super) fn deserialize(text: &str, file: &str) -> Result<CatalogFile, CatalogErrors> {
    let error = |job: Option<String>, field: Option<String>, message: String| {
        CatalogErrors(vec![CatalogError {
            file: file.to_string(),
            job,
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
        let (job, field) = match segments.as_slice() {
            [first, job, rest @ ..] if first == "jobs" => (
                Some(job.clone()),
                (!rest.is_empty()).then(|| rest.join(".")),
            ),
            [] => (None, None),
            all => (None, Some(all.join("."))),
        };
        error(job, field, message)
    })
}

/// Checks every rule and builds the validated catalog.
pub(super) fn validate(raw: CatalogFile, file: &str) -> Result<Catalog, CatalogErrors> {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let now = chrono::Utc::now();
    let mut fail = |job: Option<&str>, field: &str, message: String| {
        errors.push(CatalogError {
            file: file.to_string(),
            job: job.map(str::to_owned),
            field: Some(field.to_string()),
            message,
        });
    };
    let s = &raw.settings;
    if !valid_name(&s.schedule_group) {
        fail(
            None,
            "settings.schedule_group",
            name_rule(&s.schedule_group),
        );
    }
    if !(1..=900).contains(&s.function_timeout_seconds) {
        fail(
            None,
            "settings.function_timeout_seconds",
            "must be 1-900 (Lambda's limit)".into(),
        );
    }
    if !(1..=14).contains(&s.queue_retention_days) || !(1..=14).contains(&s.dlq_retention_days) {
        fail(
            None,
            "settings.queue_retention_days",
            "queue and DLQ retention must each be 1-14 days (SQS's limit)".into(),
        );
    }

    let mut checked = Vec::new();
    for (name, spec) in &raw.jobs {
        let job = Some(name.as_str());
        if !valid_name(name) {
            fail(job, "name", name_rule(name));
        }
        if spec.owner.trim().is_empty() {
            fail(
                job,
                "owner",
                "must name who to ask when the job fails".into(),
            );
        }
        let target = match spec.target.as_str() {
            "queue" => Target::Queue,
            t => match t.strip_prefix("chain:") {
                Some(chain) if valid_name(chain) => Target::Chain(chain.to_string()),
                _ => {
                    fail(
                        job,
                        "target",
                        format!("`{t}` is not `queue` or `chain:<state machine name>`"),
                    );
                    Target::Queue
                }
            },
        };
        if spec.overlap != crate::job::Overlap::Allow && matches!(target, Target::Chain(_)) {
            fail(
                job,
                "overlap",
                "applies to jobs the worker runs (target `queue`); a chain's steps are queue jobs, give it to them".into(),
            );
        }
        if let Some(message) = spec
            .pause_after_failures
            .and_then(|n| pause_rule(spec, &target, n))
        {
            fail(job, "pause_after_failures", message);
        }
        let timeout = s.function_timeout_seconds;
        if spec.lease_seconds == 0 || spec.lease_seconds > timeout {
            fail(
                job,
                "lease_seconds",
                format!(
                    "{} s is longer than the function timeout ({timeout} s, settings.function_timeout_seconds); a lease must end when the function can no longer be running",
                    spec.lease_seconds
                ),
            );
        }
        if let Some(h) = spec.heartbeat_seconds
            && (h == 0 || h >= spec.lease_seconds)
        {
            fail(
                job,
                "heartbeat_seconds",
                format!(
                    "{h} s must be shorter than the lease ({} s)",
                    spec.lease_seconds
                ),
            );
        }
        if let Some(t) = spec.timeout_seconds
            && (t == 0 || t > timeout)
        {
            fail(
                job,
                "timeout_seconds",
                format!("{t} s exceeds the function timeout ({timeout} s)"),
            );
        }
        if let Some(days) = spec.record_retention_days {
            let needed = s.queue_retention_days + s.dlq_retention_days;
            if days < needed {
                fail(
                    job,
                    "record_retention_days",
                    format!(
                        "{days} days is shorter than queue + DLQ retention ({} + {} days): a duplicate could arrive after its record expired and run again",
                        s.queue_retention_days, s.dlq_retention_days
                    ),
                );
            }
        }
        let r = &spec.retry;
        if r.max_attempts == 0 {
            fail(job, "retry.max_attempts", "must be at least 1".into());
        }
        let max_visibility = MAX_VISIBILITY.as_secs() as u32;
        if r.max_delay_seconds > max_visibility {
            fail(
                job,
                "retry.max_delay_seconds",
                format!(
                    "{} s exceeds SQS's 12-hour visibility limit ({max_visibility} s)",
                    r.max_delay_seconds
                ),
            );
        }
        if r.first_delay_seconds > r.max_delay_seconds || r.base_delay_seconds > r.max_delay_seconds
        {
            fail(
                job,
                "retry.max_delay_seconds",
                "must not be below first_delay_seconds or base_delay_seconds".into(),
            );
        }
        let template = match spec.key_template.as_deref().map(str::parse::<KeyTemplate>) {
            Some(Err(e)) => {
                fail(job, "key_template", e.to_string());
                None
            }
            Some(Ok(t)) => Some(t),
            None => None,
        };
        let schedule = spec.schedule.as_ref().and_then(|sched| {
            let expression = match sched.expression.parse::<ScheduleExpression>() {
                Ok(e) => Some(e),
                Err(e) => {
                    fail(job, "schedule.expression", e.to_string());
                    None
                }
            };
            let tz = match parse_timezone(&sched.timezone) {
                Ok(tz) => Some(tz),
                Err(e) => {
                    fail(job, "schedule.timezone", e.to_string());
                    None
                }
            };
            if let (Some(start), Some(end)) = (sched.start, sched.end)
                && start >= end
            {
                fail(job, "schedule.end", format!("{end} is not after the start ({start})"));
            }
            if expression.as_ref().is_some_and(ScheduleExpression::is_one_time)
                && (sched.start.is_some() || sched.end.is_some())
            {
                let field = if sched.start.is_some() { "schedule.start" } else { "schedule.end" };
                fail(job, field, format!("{} fires once at its own time: a start or end date applies to recurring schedules (EventBridge Scheduler ignores it here)", sched.expression));
            }
            if sched.flexible_window_minutes > 1440 {
                fail(job, "schedule.flexible_window_minutes", "must be 0-1440".into());
            }
            if sched.delivery_retries > 185 {
                fail(job, "schedule.delivery_retries", "must be 0-185".into());
            }
            if !(60..=86_400).contains(&sched.max_event_age_seconds) {
                fail(job, "schedule.max_event_age_seconds", "must be 60-86400".into());
            }
            // A scheduled run carries the catalog payload: the key template must find its fields.
            if let Some(t) = &template
                && let Err(e) = t.render(spec.payload.as_ref())
            {
                fail(job, "key_template", format!("{e}: every scheduled run would be rejected as poison"));
            }
            let (expression, tz) = (expression?, tz?);
            if template.is_some() && !expression.is_one_time() {
                fail(
                    job,
                    "key_template",
                    format!(
                        "with the recurring schedule {expression}, every firing carries the same payload and so the same key: all but the first would be skipped as duplicates (without a template the key is <job>#<scheduled_for>)"
                    ),
                );
            }
            let mut schedule = Schedule::new(expression, tz);
            schedule.start = sched.start;
            schedule.end = sched.end;
            // A schedule whose last firing is behind it is history, not a mistake: the
            // one-off migration ran yesterday. It must never stop a binary from starting.
            if sched.enabled && schedule.finished_by(now) {
                warnings.push(CatalogError {
                    file: file.to_string(),
                    job: Some(name.clone()),
                    field: Some(if schedule.expression.is_one_time() { "schedule.expression" } else { "schedule.end" }.into()),
                    message: format!("{} has no run left after {}: it fires no more (sync does not create it, and leaves one already there as it is)", schedule.expression, now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
                });
            }
            Some(schedule)
        });
        checked.push((name, spec, target, schedule));
    }
    if errors.is_empty() {
        // Only now: building a policy relies on the checks above.
        let jobs = checked
            .into_iter()
            .map(|(name, spec, target, schedule)| {
                let job = Job {
                    name: name.clone(),
                    spec: spec.clone(),
                    target,
                    policy: policy(spec, &raw.settings),
                    schedule,
                };
                (name.clone(), job)
            })
            .collect();
        Ok(Catalog {
            file: file.to_string(),
            settings: raw.settings,
            jobs,
            warnings,
        })
    } else {
        Err(CatalogErrors(errors))
    }
}

/// What is contradictory about `pause_after_failures = n` for this job, if anything: it
/// pauses a recurring schedule of a job the worker runs.
fn pause_rule(spec: &super::model::JobSpec, target: &Target, n: u32) -> Option<String> {
    if n == 0 {
        return Some("must be at least 1 (omit it to never pause)".into());
    }
    if let Target::Chain(_) = target {
        return Some(
            "applies to jobs the worker runs (target `queue`): the worker counts their FAILED runs"
                .into(),
        );
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

/// Schedule and group names: 1-64 of `[0-9a-zA-Z-_.]`.
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn name_rule(name: &str) -> String {
    format!(
        "`{name}` must be 1-64 characters of letters, digits, `-`, `_` and `.` (EventBridge Scheduler's rule)"
    )
}
