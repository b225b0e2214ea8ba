//! Rules a job's and a chain's fields share: a schedule table, and the names EventBridge
//! Scheduler accepts. A leaf of the catalog: validation and chains both check with it.

use crate::schedule::{Schedule, ScheduleExpression, parse_timezone};

use super::model::ScheduleSpec;

/// Checks a `schedule` table (a job's or a chain's) and builds its schedule; `report`
/// gets each problem as (is it only a warning, field, message).
pub(super) fn check_schedule(
    sched: &ScheduleSpec,
    now: chrono::DateTime<chrono::Utc>,
    report: &mut dyn FnMut(bool, &str, String),
) -> Option<Schedule> {
    let mut fail = |field: &str, message: String| report(false, field, message);
    let expression = match sched.expression.parse::<ScheduleExpression>() {
        Ok(e) => Some(e),
        Err(e) => {
            fail("schedule.expression", e.to_string());
            None
        }
    };
    let tz = match parse_timezone(&sched.timezone) {
        Ok(tz) => Some(tz),
        Err(e) => {
            fail("schedule.timezone", e.to_string());
            None
        }
    };
    if let (Some(start), Some(end)) = (sched.start, sched.end)
        && start >= end
    {
        fail(
            "schedule.end",
            format!("{end} is not after the start ({start})"),
        );
    }
    if expression
        .as_ref()
        .is_some_and(ScheduleExpression::is_one_time)
        && (sched.start.is_some() || sched.end.is_some())
    {
        let field = if sched.start.is_some() {
            "schedule.start"
        } else {
            "schedule.end"
        };
        fail(
            field,
            format!(
                "{} fires once at its own time: a start or end date applies to recurring schedules (EventBridge Scheduler ignores it here)",
                sched.expression
            ),
        );
    }
    if sched.flexible_window_minutes > 1440 {
        fail("schedule.flexible_window_minutes", "must be 0-1440".into());
    }
    if sched.delivery_retries > 185 {
        fail("schedule.delivery_retries", "must be 0-185".into());
    }
    if !(60..=86_400).contains(&sched.max_event_age_seconds) {
        fail("schedule.max_event_age_seconds", "must be 60-86400".into());
    }
    warn_of_an_unknown_phase(sched, expression.as_ref(), report);
    let mut schedule = Schedule::new(expression?, tz?);
    schedule.start = sched.start;
    schedule.end = sched.end;
    // A schedule whose last firing is behind it is history, not a mistake: the one-off
    // migration ran yesterday. It must never stop a binary from starting.
    if sched.enabled && schedule.finished_by(now) {
        let field = if schedule.expression.is_one_time() {
            "schedule.expression"
        } else {
            "schedule.end"
        };
        report(
            true,
            field,
            format!(
                "{} has no run left after {}: it fires no more (sync does not create it, and leaves one already there as it is)",
                schedule.expression,
                now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        );
    }
    Some(schedule)
}

/// A rate without a start runs on the phase of its schedule's creation: nothing the
/// catalog says, so the accountant cannot expect its firings. A warning, not an error:
/// the schedule works, only its missed runs would go unnoticed.
fn warn_of_an_unknown_phase(
    sched: &ScheduleSpec,
    expression: Option<&ScheduleExpression>,
    report: &mut dyn FnMut(bool, &str, String),
) {
    if sched.enabled
        && sched.start.is_none()
        && expression.is_some_and(|e| matches!(e.kind, crate::schedule::Expression::Rate(_)))
    {
        report(
            true,
            "schedule.start",
            format!(
                "{} without a start fires on the phase of the moment its schedule is created, which the catalog cannot know: the accountant does not expect its firings (missed runs go unnoticed); give it a `start`",
                sched.expression
            ),
        );
    }
}

/// Schedule and group names: 1-64 of `[0-9a-zA-Z-_.]`.
pub(super) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// What a name must be, said of `name`.
pub(super) fn name_rule(name: &str) -> String {
    format!(
        "`{name}` must be 1-64 characters of letters, digits, `-`, `_` and `.` (EventBridge Scheduler's rule)"
    )
}

/// `long-report` → `LongReport`: the CloudFormation logical id of a resource named after a
/// job or a chain (the catalog refuses two names with one id; `crate::iac` writes them).
pub fn logical_id(name: &str) -> String {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}
