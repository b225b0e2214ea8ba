//! The envelope a schedule sends: a template over EventBridge Scheduler's context
//! attributes, which the scheduler (or the local firing engine) fills in at fire time.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

/// Becomes the firing's scheduled time (RFC 3339, to the second): `scheduled_for`.
pub(crate) const SCHEDULED_TIME: &str = "<aws.scheduler.scheduled-time>";
/// Becomes the scheduler's id for the firing: `execution_id`.
pub(crate) const EXECUTION_ID: &str = "<aws.scheduler.execution-id>";
/// Becomes the ARN of the schedule that fired: `schedule_arn`.
pub const SCHEDULE_ARN: &str = "<aws.scheduler.schedule-arn>";
/// Becomes the scheduler's delivery attempt, from 1 (its retries, not the worker's): `attempt`.
pub(crate) const ATTEMPT_NUMBER: &str = "<aws.scheduler.attempt-number>";

/// The target `Input` for a job: the envelope with the context attributes in place of the
/// values only known at fire time. Keys are written in a fixed order, so the same catalog
/// always yields the same text (schedule sync compares it).
pub fn envelope_template(job: &str, payload: &Map<String, Value>) -> String {
    let mut out = format!(
        r#"{{"job":{},"scheduled_for":"{SCHEDULED_TIME}","execution_id":"{EXECUTION_ID}","schedule_arn":"{SCHEDULE_ARN}","attempt":"{ATTEMPT_NUMBER}""#,
        Value::String(job.to_string())
    );
    if !payload.is_empty() {
        out.push_str(r#","payload":"#);
        out.push_str(&Value::Object(payload.clone()).to_string());
    }
    out.push('}');
    out
}

/// A schedule's description: who owns the job, and what it does (at most 512 characters,
/// EventBridge Scheduler's limit).
pub fn description(owner: &str, what: Option<&str>) -> String {
    let mut text = format!("owner: {owner}");
    if let Some(d) = what {
        text = format!("{text}. {d}");
    }
    text.chars().take(512).collect()
}

/// The values of one firing.
#[derive(Debug, Clone)]
pub struct FireContext {
    /// The occurrence being fired, not the moment of delivery; written to the second.
    pub scheduled_time: DateTime<Utc>,
    /// The scheduler's id for the firing, for tracing a run back to it.
    pub execution_id: String,
    /// ARN of the schedule that fired.
    pub schedule_arn: String,
    /// The delivery attempt, from 1: the scheduler's own retries, not the worker's.
    pub attempt: u32,
}

/// Fills the context attributes in, as the scheduler does (plain text replacement).
pub fn substitute(input: &str, ctx: &FireContext) -> String {
    input
        .replace(
            SCHEDULED_TIME,
            &ctx.scheduled_time
                .to_rfc3339_opts(SecondsFormat::Secs, true),
        )
        .replace(EXECUTION_ID, &ctx.execution_id)
        .replace(SCHEDULE_ARN, &ctx.schedule_arn)
        .replace(ATTEMPT_NUMBER, &ctx.attempt.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::Envelope;
    use serde_json::json;

    #[test]
    fn a_filled_template_is_the_envelope() {
        let payload = json!({"tenant": "a\"b", "n": 1})
            .as_object()
            .cloned()
            .unwrap();
        let template = envelope_template("nightly", &payload);
        let input = substitute(
            &template,
            &FireContext {
                scheduled_time: "2026-11-29T03:00:00Z".parse().unwrap(),
                execution_id: "e-1".into(),
                schedule_arn: "arn:aws:scheduler:us-east-1:000000000000:schedule/g/nightly".into(),
                attempt: 2,
            },
        );
        let envelope = Envelope::parse(&input).unwrap();
        assert_eq!(envelope.job, "nightly");
        assert_eq!(
            envelope.scheduled_for.to_rfc3339(),
            "2026-11-29T03:00:00+00:00"
        );
        assert_eq!(envelope.execution_id.as_deref(), Some("e-1"));
        assert_eq!(envelope.attempt, Some(2));
        assert_eq!(envelope.payload_value(), json!({"tenant": "a\"b", "n": 1}));
        assert!(!envelope_template("x", &Map::new()).contains("payload"));
    }
}
