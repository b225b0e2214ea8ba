//! schedkit's dead letter: the body as it came, and why, as message attributes that fit
//! beside it under SQS's size limit; written by the worker, read back by the operator.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{DeadLetterReason, attr};
use crate::envelope::Envelope;
use crate::queue::{Attribute, Outgoing};
use crate::store::{prefix, timestamp};

/// Everything a dead letter says about itself. The worker fills every field but
/// `reason`'s absence; a letter SQS's redrive policy moved has only its body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeadLetter {
    /// The original message body, sent unchanged so a redrive replays it as it was.
    pub body: String,
    /// Why it was dead-lettered (a [`DeadLetterReason`] as text): whether a fix and a
    /// redrive can help. None when SQS's own redrive policy moved it.
    pub reason: Option<String>,
    /// The last error (at most 1024 bytes on the letter; the record keeps the history).
    pub error: Option<String>,
    /// The job: the letter's attribute, else the body's when it parses as an envelope.
    pub job: Option<String>,
    /// The execution key: the letter's attribute, else the body's explicit `key`.
    pub key: Option<String>,
    /// Attempts of the failed round; 0 for a message rejected unrun.
    pub attempts: Option<u32>,
    /// When the worker gave up, RFC 3339 in UTC with milliseconds.
    pub failed_at: Option<String>,
    /// URL of the jobs queue the message came from.
    pub source_queue: Option<String>,
    /// The message's id on the jobs queue.
    #[serde(skip)]
    pub source_message_id: Option<String>,
}

impl DeadLetter {
    /// A letter the worker writes: `body` dead-lettered for `reason` after `attempts`.
    pub fn written(
        body: &str,
        reason: DeadLetterReason,
        error: &str,
        attempts: u32,
        failed_at: DateTime<Utc>,
    ) -> DeadLetter {
        DeadLetter {
            body: body.to_string(),
            reason: Some(reason.as_str().to_string()),
            error: Some(error.to_string()),
            attempts: Some(attempts),
            failed_at: Some(timestamp(failed_at)),
            ..DeadLetter::default()
        }
    }

    /// The same letter, of `job` and `key` when they are known.
    pub(crate) fn of_run(mut self, job: Option<&str>, key: Option<&str>) -> DeadLetter {
        self.job = job.map(str::to_string);
        self.key = key.map(str::to_string);
        self
    }

    /// The same letter, taken from `source_queue` (its message id there when known).
    pub(crate) fn sent_from(mut self, source_queue: &str, source_message_id: &str) -> DeadLetter {
        self.source_queue = Some(source_queue.to_string());
        self.source_message_id = Some(source_message_id.to_string()).filter(|id| !id.is_empty());
        self
    }

    /// A letter as received: its body and its attributes' text (`text(name)`). Without
    /// schedkit's attributes, the body may still say which job and key it was.
    pub fn read(body: String, text: impl Fn(&str) -> Option<String>) -> DeadLetter {
        let envelope = Envelope::parse(&body).ok();
        DeadLetter {
            reason: text(attr::REASON),
            error: text(attr::ERROR),
            job: text(attr::JOB).or_else(|| envelope.as_ref().map(|e| e.job.clone())),
            key: text(attr::KEY).or_else(|| envelope.as_ref().and_then(|e| e.key.clone())),
            attempts: text(attr::ATTEMPTS).and_then(|a| a.parse().ok()),
            failed_at: text(attr::FAILED_AT),
            source_queue: text(attr::SOURCE_QUEUE),
            source_message_id: text(attr::SOURCE_MESSAGE_ID),
            body,
        }
    }

    /// The letter as the dead-letter queue receives it: its body as it came, and its
    /// reason, error and run as attributes (as many as fit SQS's size limit).
    pub(crate) fn outgoing(&self) -> Outgoing {
        let attributes = fit(self.body.len(), attributes(self))
            .into_iter()
            .map(|(name, data_type, value)| {
                let attribute = Attribute {
                    data_type: data_type.to_string(),
                    string: Some(value),
                    binary: None,
                };
                (name.to_string(), attribute)
            })
            .collect();
        Outgoing {
            body: self.body.clone(),
            attributes,
            delay_seconds: None,
            group: None,
        }
    }
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

/// The letter's attributes, as SQS takes them: those it has.
fn attributes(letter: &DeadLetter) -> Vec<Field> {
    let full = letter.error.as_deref().unwrap_or_default();
    let mut error = prefix(full, ERROR_ATTRIBUTE_CAP).to_string();
    if error.len() < full.len() {
        error.push('…');
    }
    let mut out = Vec::new();
    if let Some(reason) = &letter.reason {
        out.push((attr::REASON, "String", attribute_text(reason)));
    }
    if let Some(attempts) = letter.attempts {
        out.push((attr::ATTEMPTS, "Number", attempts.to_string()));
    }
    out.push((
        attr::ERROR,
        "String",
        attribute_text(if error.is_empty() { "-" } else { &error }),
    ));
    let texts = [
        (attr::FAILED_AT, letter.failed_at.as_deref()),
        (attr::SOURCE_QUEUE, letter.source_queue.as_deref()),
        (attr::SOURCE_MESSAGE_ID, letter.source_message_id.as_deref()),
    ];
    for (name, value) in texts {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            out.push((name, "String", attribute_text(v)));
        }
    }
    for (name, value) in [
        (attr::JOB, letter.job.as_deref()),
        (attr::KEY, letter.key.as_deref()),
    ] {
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
#[cfg(test)]
mod tests {
    use super::*;

    fn letter(body: &str, error: &str) -> DeadLetter {
        let failed_at = "2026-11-01T00:00:01Z".parse().unwrap();
        DeadLetter::written(body, DeadLetterReason::PermanentError, error, 1, failed_at)
            .of_run(Some("export"), Some("export#2026-11-01T00:00:00Z"))
            .sent_from(
                "https://sqs.us-east-1.amazonaws.com/1/schedkit-prod-jobs",
                "m-1",
            )
    }

    #[test]
    fn what_the_worker_writes_the_operator_reads_back() {
        let written = letter(
            r#"{"job":"export","scheduled_for":"2026-11-01T00:00:00Z"}"#,
            "boom",
        );
        let out = written.outgoing();
        let read = DeadLetter::read(out.body.clone(), |name| {
            out.attributes.get(name).and_then(|a| a.string.clone())
        });
        assert_eq!(read, written);
    }

    #[test]
    fn a_letter_without_attributes_still_names_its_job_and_key_from_the_body() {
        let body = r#"{"job":"export","scheduled_for":"2026-11-01T00:00:00Z","key":"k1"}"#;
        let read = DeadLetter::read(body.to_string(), |_| None);
        assert_eq!(read.reason, None);
        assert_eq!(read.job.as_deref(), Some("export"));
        assert_eq!(read.key.as_deref(), Some("k1"));
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
