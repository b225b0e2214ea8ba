//! Dead letters with their reasons.
//!
//! The worker sends the original body to the DLQ with message attributes that say why
//! (job, key, attempts, error, failed at, source queue), and only then lets the source
//! message be deleted: a crash in between leaves a duplicate, never a loss.

use chrono::{DateTime, Utc};

use crate::queue::{Attribute, Outgoing};
use crate::store::{prefix, timestamp};

/// Message attribute names on dead letters (SQS allows ten per message; we use eight).
pub mod attr {
    /// Why it was dead-lettered: a [`DeadLetterReason`](super::DeadLetterReason) as text.
    pub const REASON: &str = "schedkit.reason";
    /// The last error, cut to 1024 bytes (marked `…`); `-` when there was none.
    pub const ERROR: &str = "schedkit.error";
    /// The job the envelope named (at most 512 bytes); absent when it named none.
    pub const JOB: &str = "schedkit.job";
    /// The execution key (at most 512 bytes); absent when none could be derived.
    pub const KEY: &str = "schedkit.key";
    /// Attempts of the round that failed, a `Number`; 0 for a message rejected unrun.
    pub const ATTEMPTS: &str = "schedkit.attempts";
    /// When the worker gave up, RFC 3339 in UTC with milliseconds.
    pub const FAILED_AT: &str = "schedkit.failed-at";
    /// URL of the jobs queue the message was taken from.
    pub const SOURCE_QUEUE: &str = "schedkit.source-queue";
    /// The message's id on the jobs queue; absent when it was not known.
    pub const SOURCE_MESSAGE_ID: &str = "schedkit.source-message-id";
}

/// Why a message was dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeadLetterReason {
    /// Not an envelope: not JSON, missing or mistyped fields, an unusable key.
    Poison,
    /// An envelope for a job this worker does not know.
    UnknownJob,
    /// The key was already used with a different payload.
    KeyConflict,
    /// Every attempt of the round failed.
    AttemptsExhausted,
    /// The job said trying again cannot help.
    PermanentError,
    /// The execution store refused the run's record for good (a validation error, access
    /// denied, a record that no longer decodes): retrying cannot help until someone fixes it.
    StoreRefused,
    /// The message names a record it does not own: a chain's end for a run that is not
    /// that chain's, or not from the execution that owns it; a step's message whose job or
    /// key is not its step's. The record is left as it was.
    RecordMismatch,
    /// The worker cannot do what the message asks with its settings: a chain whose state
    /// machine it does not know, or that Step Functions refused to start. Fix the worker's
    /// settings, then redrive.
    Unconfigured,
}

impl DeadLetterReason {
    /// The text sent in the `schedkit.reason` attribute, which operators select on.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterReason::Poison => "poison",
            DeadLetterReason::UnknownJob => "unknown-job",
            DeadLetterReason::KeyConflict => "key-conflict",
            DeadLetterReason::AttemptsExhausted => "attempts-exhausted",
            DeadLetterReason::PermanentError => "permanent-error",
            DeadLetterReason::StoreRefused => "store-refused",
            DeadLetterReason::RecordMismatch => "record-mismatch",
            DeadLetterReason::Unconfigured => "unconfigured",
        }
    }
}

impl std::fmt::Display for DeadLetterReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything a dead letter says about itself.
#[derive(Debug, Clone)]
pub struct DeadLetter<'a> {
    /// The original message body, sent unchanged so a redrive replays it as it was.
    pub body: &'a str,
    /// Why it was dead-lettered: it tells whether a fix and a redrive can help.
    pub reason: DeadLetterReason,
    /// The last error; trimmed for the attribute, the record keeps the full history.
    pub error: &'a str,
    /// None when the body did not name a job (poison).
    pub job: Option<&'a str>,
    /// None when no key was derived (poison, unknown job).
    pub key: Option<&'a str>,
    /// Attempts of the round that failed; 0 when the message was rejected unrun.
    pub attempts: u32,
    /// When the worker gave up on the message.
    pub failed_at: DateTime<Utc>,
    /// URL of the jobs queue the message came from.
    pub source_queue: &'a str,
    /// The message's id on the jobs queue; empty leaves the attribute out.
    pub source_message_id: &'a str,
}

/// Longest error text put in an attribute; the record keeps the full history.
const ERROR_ATTRIBUTE_CAP: usize = 1024;

/// Longest job name or key put in an attribute (they come from the message and may be
/// anything); the body carries them whole.
const NAME_ATTRIBUTE_CAP: usize = 512;

/// `text` as SQS accepts it in an attribute: characters XML does not allow (NUL and the
/// other control characters but tab and line breaks, U+FFFE, U+FFFF) become U+FFFD.
/// They reach us inside JSON escapes of a poison message, which must still be
/// dead-lettered with its reason.
fn attribute_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => '\u{fffd}',
            _ => c,
        })
        .collect()
}

/// SQS's limit on a message: its body and its attributes (names, types and values).
const SQS_MESSAGE_LIMIT: usize = 256 * 1024;

/// One message attribute: name, data type, value.
type Field = (&'static str, &'static str, String);

/// The letter's attributes, as SQS takes them.
fn attributes(letter: &DeadLetter<'_>) -> Vec<Field> {
    let mut error = prefix(letter.error, ERROR_ATTRIBUTE_CAP).to_string();
    if error.len() < letter.error.len() {
        error.push('…');
    }
    let mut out = vec![
        (attr::REASON, "String", letter.reason.as_str().to_string()),
        (attr::ATTEMPTS, "Number", letter.attempts.to_string()),
        (
            attr::ERROR,
            "String",
            attribute_text(if error.is_empty() { "-" } else { &error }),
        ),
        (attr::FAILED_AT, "String", timestamp(letter.failed_at)),
        (
            attr::SOURCE_QUEUE,
            "String",
            attribute_text(letter.source_queue),
        ),
    ];
    if !letter.source_message_id.is_empty() {
        out.push((
            attr::SOURCE_MESSAGE_ID,
            "String",
            attribute_text(letter.source_message_id),
        ));
    }
    for (name, value) in [(attr::JOB, letter.job), (attr::KEY, letter.key)] {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            out.push((
                name,
                "String",
                attribute_text(prefix(v, NAME_ATTRIBUTE_CAP)),
            ));
        }
    }
    out
}

/// The attributes that fit beside a body of `body_len` bytes under SQS's limit. A body
/// near the limit must still reach the DLQ whole (it is what a redrive sends back), so the
/// attributes give way: the error is shortened first, then the key, the job, the source
/// queue, the source message id, the attempts are left out; the time and the reason go
/// last (a redrive needs them: the reason marks it, the time names the failed round; the
/// execution record keeps the whole story).
fn fit(body_len: usize, mut attrs: Vec<Field>) -> Vec<Field> {
    let size =
        |a: &[Field]| -> usize { a.iter().map(|(n, t, v)| n.len() + t.len() + v.len()).sum() };
    let over = |a: &[Field]| (body_len + size(a)).saturating_sub(SQS_MESSAGE_LIMIT);
    if over(&attrs) == 0 {
        return attrs;
    }
    let excess = over(&attrs);
    if let Some(error) = attrs.iter_mut().find(|a| a.0 == attr::ERROR)
        && error.2.len() > excess + '…'.len_utf8()
    {
        // Shortening the error alone is enough.
        let keep = error.2.len() - excess - '…'.len_utf8();
        error.2 = format!("{}…", prefix(&error.2, keep));
    }
    for name in [
        attr::KEY,
        attr::JOB,
        attr::SOURCE_QUEUE,
        attr::SOURCE_MESSAGE_ID,
        attr::ERROR,
        attr::ATTEMPTS,
        attr::FAILED_AT,
        attr::REASON,
    ] {
        if over(&attrs) == 0 {
            break;
        }
        attrs.retain(|a| a.0 != name);
    }
    attrs
}

/// The letter as the dead-letter queue receives it: its body as it came, and its reason,
/// error and run as attributes (as many as fit SQS's size limit).
pub fn outgoing(letter: &DeadLetter<'_>) -> Outgoing {
    let attributes = fit(letter.body.len(), attributes(letter))
        .into_iter()
        .map(|(name, data_type, value)| {
            let attribute = Attribute {
                data_type: data_type.to_string(),
                string: Some(value.to_string()),
                binary: None,
            };
            (name.to_string(), attribute)
        })
        .collect();
    Outgoing {
        body: letter.body.to_string(),
        attributes,
        delay_seconds: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter<'a>(body: &'a str, error: &'a str) -> DeadLetter<'a> {
        DeadLetter {
            body,
            reason: DeadLetterReason::PermanentError,
            error,
            job: Some("export"),
            key: Some("export#2026-11-01T00:00:00Z"),
            attempts: 1,
            failed_at: "2026-11-01T00:00:01Z".parse().unwrap(),
            source_queue: "https://sqs.us-east-1.amazonaws.com/1/schedkit-prod-jobs",
            source_message_id: "m-1",
        }
    }

    fn size(body: &str, attrs: &[Field]) -> usize {
        body.len()
            + attrs
                .iter()
                .map(|(n, t, v)| n.len() + t.len() + v.len())
                .sum::<usize>()
    }

    #[test]
    fn a_small_letter_keeps_every_attribute() {
        let l = letter("{}", "boom");
        let attrs = fit(l.body.len(), attributes(&l));
        assert_eq!(attrs.len(), 8);
    }

    #[test]
    fn a_body_near_the_sqs_limit_keeps_whole_and_the_attributes_give_way_reason_last() {
        let error = "e".repeat(5000);
        for body_len in [
            SQS_MESSAGE_LIMIT - 1500,
            SQS_MESSAGE_LIMIT - 200,
            SQS_MESSAGE_LIMIT - 40,
        ] {
            let body = "b".repeat(body_len);
            let l = letter(&body, &error);
            let attrs = fit(body.len(), attributes(&l));
            assert!(size(&body, &attrs) <= SQS_MESSAGE_LIMIT, "{body_len}");
            assert!(
                attrs.iter().any(|a| a.0 == attr::REASON),
                "{body_len}: {attrs:?}"
            );
        }
        let body = "b".repeat(SQS_MESSAGE_LIMIT - 1500);
        let attrs = fit(body.len(), attributes(&letter(&body, &error)));
        let error = attrs.iter().find(|a| a.0 == attr::ERROR).unwrap();
        assert!(
            error.2.ends_with('…'),
            "shortened, not dropped, when that is enough"
        );
    }

    #[test]
    fn attribute_text_replaces_what_sqs_refuses_and_keeps_the_rest() {
        assert_eq!(attribute_text("a\u{0}b\u{1b}c"), "a\u{fffd}b\u{fffd}c");
        assert_eq!(attribute_text("line\none\ttab\r"), "line\none\ttab\r");
        assert_eq!(attribute_text("x\u{fffe}\u{ffff}"), "x\u{fffd}\u{fffd}");
        assert_eq!(attribute_text("Zürich 🚀 #2026"), "Zürich 🚀 #2026");
    }
}
