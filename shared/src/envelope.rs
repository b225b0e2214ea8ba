//! The envelope: what a schedule (or `fire`, or a test) puts on the jobs queue.
//!
//! EventBridge Scheduler fills its context attributes into the target input at fire time,
//! so by the time a worker sees a message, `scheduled_for`, `execution_id`, `schedule_arn`
//! and `attempt` are plain values. Anything that does not parse as an envelope is a poison
//! message: it can never succeed, so it is dead-lettered at once with the reason.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// One unit of scheduled work, as carried on the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// Name of the job in the catalog.
    pub job: String,
    /// The instant the run was scheduled for (the scheduler's `scheduled-time`).
    #[serde(deserialize_with = "rfc3339", serialize_with = "serialize_rfc3339")]
    pub scheduled_for: DateTime<Utc>,
    /// Explicit idempotency key; wins over every derived key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Job input. Always an object, so key templates can name its fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Map<String, Value>>,
    /// The scheduler's `execution-id`, for tracing a run back to its firing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// The scheduler's `schedule-arn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_arn: Option<String>,
    /// The scheduler's `attempt-number` (its own delivery retries, not ours).
    #[serde(
        default,
        deserialize_with = "attempt_number",
        skip_serializing_if = "Option::is_none"
    )]
    pub attempt: Option<u32>,
    /// Set on the messages of a chain's run (Step Functions writes them): a step to run and
    /// answer, or how the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<ChainContext>,
    /// This run's priority for a freed permit of its limits, over its job's (`fire
    /// --priority`): -10 to 10, higher first. Its sender put a run above 0 on the urgent
    /// queue ([`crate::queue::urgent`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// Which run of which chain a message belongs to, and what it asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainContext {
    /// The chain (`[chains.<name>]`).
    pub name: String,
    /// The chain key: one run of the chain (its steps are keyed `<chain key>#<step>`).
    pub key: String,
    /// The step this message runs (a step message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The chain run's payload (a step message): [`crate::job::ChainStep::input`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// The Step Functions task token the step's outcome answers (a step message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_token: Option<String>,
    /// How the run ended, `paused` or `done` (an outcome message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The Step Functions execution that sent the outcome: a run's record ends only by
    /// the outcome of its current execution (an outcome message of an earlier run, sent
    /// again after a rerun, changes nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
    /// The results of the stage the run paused in, one per step: `{"step"}` for a done
    /// one, `{"step", "failed", "error", "cause"}` for a failed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Vec<Value>>,
}

/// Why a message body is not an envelope. The text names the offending field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// The body does not parse as JSON; holds the parser's message.
    #[error("body is not JSON: {0}")]
    NotJson(String),
    /// Valid JSON but not an object; holds what it is (`an array`, `null`...).
    #[error("body is JSON but not an object (found {0})")]
    NotAnObject(&'static str),
    /// A field is missing, unknown or mistyped; the text names it where serde can.
    #[error("{0}")]
    Invalid(String),
    /// `job` is blank or `key` is empty; holds which field.
    #[error("field `{0}` must not be empty")]
    Empty(&'static str),
    /// DynamoDB refuses partition keys over 2048 bytes.
    #[error("field `key` is {0} bytes long; keys are limited to 1024 bytes")]
    KeyTooLong(usize),
}

/// The priorities a job (the catalog's `priority`) or a fired run may have: the levels a
/// run waiting for a limit rises through (see `store::AGING`).
pub const PRIORITIES: std::ops::RangeInclusive<i32> = -10..=10;

/// Longest explicit key accepted (DynamoDB allows 2048 bytes; leave room for prefixes).
pub(crate) const MAX_KEY_BYTES: usize = 1024;

impl Envelope {
    /// A new envelope for `job` scheduled at `scheduled_for`, no payload or key.
    pub fn new(job: impl Into<String>, scheduled_for: DateTime<Utc>) -> Self {
        Envelope {
            job: job.into(),
            scheduled_for,
            key: None,
            payload: None,
            execution_id: None,
            schedule_arn: None,
            attempt: None,
            chain: None,
            priority: None,
        }
    }

    /// The same envelope with `payload` (a JSON object: what `fire --payload` sends).
    ///
    /// # Panics
    /// When `payload` is not an object: an envelope's payload always is.
    pub fn with_payload(mut self, payload: Value) -> Self {
        match payload {
            Value::Object(map) => self.payload = Some(map),
            other => panic!(
                "an envelope's payload is a JSON object, not {}",
                json_kind(&other)
            ),
        }
        self
    }

    /// The same envelope with an explicit execution key.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Parses and validates a message body.
    pub fn parse(body: &str) -> Result<Self, EnvelopeError> {
        let value: Value =
            serde_json::from_str(body).map_err(|e| EnvelopeError::NotJson(e.to_string()))?;
        if !value.is_object() {
            return Err(EnvelopeError::NotAnObject(json_kind(&value)));
        }
        let envelope: Envelope = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            if path == "." {
                EnvelopeError::Invalid(inner)
            } else {
                EnvelopeError::Invalid(format!("field `{path}`: {inner}"))
            }
        })?;
        if envelope.job.trim().is_empty() {
            return Err(EnvelopeError::Empty("job"));
        }
        if let Some(p) = envelope.priority
            && !PRIORITIES.contains(&p)
        {
            return Err(EnvelopeError::Invalid(format!(
                "field `priority`: {p} is outside {}..={}",
                PRIORITIES.start(),
                PRIORITIES.end()
            )));
        }
        if let Some(key) = &envelope.key {
            if key.is_empty() {
                return Err(EnvelopeError::Empty("key"));
            }
            if key.len() > MAX_KEY_BYTES {
                return Err(EnvelopeError::KeyTooLong(key.len()));
            }
        }
        Ok(envelope)
    }

    /// The body to put on a queue.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an envelope always serialises")
    }

    /// The payload as a JSON value (an empty object when absent).
    pub fn payload_value(&self) -> Value {
        Value::Object(self.payload.clone().unwrap_or_default())
    }
}

/// `scheduled_for` as written in keys and records: RFC 3339, UTC, `Z`.
pub(crate) fn format_instant(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn rfc3339<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    let text = String::deserialize(d)?;
    DateTime::parse_from_rfc3339(&text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            serde::de::Error::custom(format!(
                "`{text}` is not an RFC 3339 timestamp ({e}); expected e.g. 2026-11-29T08:00:00Z"
            ))
        })
}

fn serialize_rfc3339<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_instant(t))
}

/// The scheduler substitutes `<aws.scheduler.attempt-number>` as text; a template may put
/// it inside quotes or not, so accept a number or a numeric string.
fn attempt_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumOrText {
        Num(u32),
        Text(String),
    }
    match Option::<NumOrText>::deserialize(d)? {
        None => Ok(None),
        Some(NumOrText::Num(n)) => Ok(Some(n)),
        Some(NumOrText::Text(t)) => t.trim().parse().map(Some).map_err(|_| {
            serde::de::Error::custom(format!("`{t}` is not a non-negative attempt number"))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_scheduler_envelope() {
        let e = Envelope::parse(
            r#"{"job":"nightly","scheduled_for":"2026-11-29T08:00:00+01:00","payload":{"a":1},
                "execution_id":"e-1","schedule_arn":"arn:aws:scheduler:::schedule/g/s","attempt":"2"}"#,
        )
        .unwrap();
        assert_eq!(e.job, "nightly");
        assert_eq!(format_instant(&e.scheduled_for), "2026-11-29T07:00:00Z");
        assert_eq!(e.attempt, Some(2));
        assert_eq!(e.payload_value()["a"], 1);
    }

    #[test]
    fn round_trips_through_json() {
        let mut e = Envelope::new("j", "2026-01-01T00:00:00Z".parse().unwrap());
        e.key = Some("k".into());
        assert_eq!(Envelope::parse(&e.to_json()).unwrap(), e);
    }

    fn err(body: &str) -> String {
        Envelope::parse(body).unwrap_err().to_string()
    }

    #[test]
    fn poison_reasons_name_the_problem() {
        assert!(err("not json").starts_with("body is not JSON"));
        assert_eq!(
            err("[1]"),
            "body is JSON but not an object (found an array)"
        );
        assert!(err(r#"{"scheduled_for":"2026-01-01T00:00:00Z"}"#).contains("missing field `job`"));
        assert!(err(r#"{"job":"j"}"#).contains("missing field `scheduled_for`"));
        let wrong = err(r#"{"job":5,"scheduled_for":"2026-01-01T00:00:00Z"}"#);
        assert!(
            wrong.starts_with("field `job`: invalid type: integer `5`"),
            "{wrong}"
        );
        let time = err(r#"{"job":"j","scheduled_for":"yesterday"}"#);
        assert!(
            time.starts_with("field `scheduled_for`: `yesterday` is not an RFC 3339"),
            "{time}"
        );
        let payload = err(r#"{"job":"j","scheduled_for":"2026-01-01T00:00:00Z","payload":[1]}"#);
        assert!(
            payload.starts_with("field `payload`: invalid type: sequence"),
            "{payload}"
        );
        let unknown = err(r#"{"job":"j","scheduled_for":"2026-01-01T00:00:00Z","paylod":{}}"#);
        assert!(unknown.contains("unknown field `paylod`"), "{unknown}");
        assert_eq!(
            err(r#"{"job":" ","scheduled_for":"2026-01-01T00:00:00Z"}"#),
            "field `job` must not be empty"
        );
        let attempt = err(r#"{"job":"j","scheduled_for":"2026-01-01T00:00:00Z","attempt":"x"}"#);
        assert!(
            attempt.contains("`x` is not a non-negative attempt number"),
            "{attempt}"
        );
    }
}
