//! Backfill: every occurrence of a job's schedule in a past span, enqueued with its own
//! `scheduled_for`, exactly as the schedule would have sent it. Each run's execution key
//! is `<job>#<scheduled_for>`, so a second backfill of the same span (or one that overlaps
//! runs the schedule made) is absorbed by the execution store: nothing runs twice.

use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use chrono::{DateTime, SecondsFormat, Utc};

use super::TriggerError;
use crate::aws::{AwsResultExt, SdkConfig};
use crate::catalog::Job;
use crate::envelope::Envelope;
use crate::schedule::Expression;

/// The most occurrences one backfill enqueues: a span that holds more is refused (split it).
pub(crate) const MAX_OCCURRENCES: usize = 100_000;

/// Why a span cannot be backfilled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackfillError {
    /// The job only runs when fired.
    #[error("job `{0}` has no schedule: run it with `schedkit fire` instead")]
    NoSchedule(String),
    /// A rate without a start has no phase the catalog knows.
    #[error(
        "job `{0}`: a rate schedule without a `start` counts from when it was created, which the catalog does not say: give it a start to backfill"
    )]
    NoPhase(String),
    /// The span is empty or reversed.
    #[error("--from ({from}) must be before --to ({to})")]
    Reversed {
        /// The span's start.
        from: String,
        /// The span's end.
        to: String,
    },
    /// A backfill is for the past: the schedule fires the future itself.
    #[error("--to ({0}) is in the future: the schedule fires what is ahead; backfill up to now")]
    Future(String),
    /// More occurrences than [`MAX_OCCURRENCES`].
    #[error("the span holds more than {max} occurrences of `{job}`: split it")]
    TooMany {
        /// The job.
        job: String,
        /// The limit.
        max: usize,
    },
}

/// The occurrences of `job`'s schedule in `[from, to)`, checked: a scheduled queue job, a
/// span in the past, a known phase.
pub fn occurrences(
    job: &Job,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<DateTime<Utc>>, BackfillError> {
    let text = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    let schedule = job
        .schedule
        .as_ref()
        .ok_or_else(|| BackfillError::NoSchedule(job.name.clone()))?;
    if matches!(schedule.expression.kind, Expression::Rate(_)) && schedule.start.is_none() {
        return Err(BackfillError::NoPhase(job.name.clone()));
    }
    if from >= to {
        return Err(BackfillError::Reversed {
            from: text(from),
            to: text(to),
        });
    }
    if to > now {
        return Err(BackfillError::Future(text(to)));
    }
    let mut out = Vec::new();
    let mut t = from - chrono::Duration::nanoseconds(1);
    while let Some(next) = schedule.next_after(t) {
        if next >= to {
            break;
        }
        if out.len() == MAX_OCCURRENCES {
            return Err(BackfillError::TooMany {
                job: job.name.clone(),
                max: MAX_OCCURRENCES,
            });
        }
        out.push(next);
        t = next;
    }
    Ok(out)
}

/// Sends one envelope per occurrence to the jobs queue, ten per request; `progress` hears
/// how many are sent so far. Returns how many were sent.
pub async fn enqueue(
    sdk: &SdkConfig,
    queue_url: &str,
    job: &Job,
    times: &[DateTime<Utc>],
    mut progress: impl FnMut(usize),
) -> Result<usize, TriggerError> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let payload = job.payload();
    // One job's backlog is one group of SQS's fair queues (see `flow::message_group`).
    let group = job
        .policy
        .flow
        .message_group(&job.name, (!payload.is_empty()).then_some(&payload));
    let mut sent = 0;
    for chunk in times.chunks(10) {
        let entries: Vec<SendMessageBatchRequestEntry> = chunk
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut envelope = Envelope::new(job.name.clone(), *t);
                envelope.payload = (!payload.is_empty()).then(|| payload.clone());
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(envelope.to_json())
                    .set_message_group_id(group.clone())
                    .build()
                    .expect("id and body set")
            })
            .collect();
        let out = sqs
            .send_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .aws("sending the backfill")?;
        if let Some(failed) = out.failed.first() {
            return Err(TriggerError::Request(format!(
                "SQS refused a backfill message ({}: {}); {sent} were sent, and running the backfill again sends the rest (the sent ones are absorbed as duplicates)",
                failed.code,
                failed.message.as_deref().unwrap_or_default()
            )));
        }
        sent += chunk.len();
        progress(sent);
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn job(schedule: &str) -> Job {
        let text = format!("[jobs.j]\nowner = \"o\"\n[jobs.j.schedule]\n{schedule}\n");
        Catalog::parse(&text, "c.toml").unwrap().jobs["j"].clone()
    }

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_span_gives_every_occurrence_once_and_bad_spans_are_refused() {
        let now = t("2026-12-01T12:00:00Z");
        let hourly = job("expression = \"cron(0 * * * ? *)\"");
        let got = occurrences(
            &hourly,
            t("2026-11-30T22:00:00Z"),
            t("2026-12-01T01:00:00Z"),
            now,
        )
        .unwrap();
        assert_eq!(
            got,
            [
                t("2026-11-30T22:00:00Z"),
                t("2026-11-30T23:00:00Z"),
                t("2026-12-01T00:00:00Z")
            ]
        );
        assert!(matches!(
            occurrences(
                &hourly,
                t("2026-12-01T11:00:00Z"),
                t("2026-12-01T13:00:00Z"),
                now
            ),
            Err(BackfillError::Future(_))
        ));
        assert!(matches!(
            occurrences(&hourly, now, now, now),
            Err(BackfillError::Reversed { .. })
        ));
        let rate = job("expression = \"rate(1 hour)\"");
        assert!(matches!(
            occurrences(&rate, t("2026-11-30T00:00:00Z"), now, now),
            Err(BackfillError::NoPhase(_))
        ));
        let phased = job("expression = \"rate(7 hours)\"\nstart = 2026-11-30T01:00:00Z");
        assert_eq!(
            occurrences(
                &phased,
                t("2026-11-30T00:00:00Z"),
                t("2026-11-30T16:00:00Z"),
                now
            )
            .unwrap(),
            [
                t("2026-11-30T01:00:00Z"),
                t("2026-11-30T08:00:00Z"),
                t("2026-11-30T15:00:00Z")
            ]
        );
        let every_minute = job("expression = \"rate(1 minute)\"\nstart = 2020-01-01T00:00:00Z");
        assert!(matches!(
            occurrences(&every_minute, t("2020-01-01T00:00:00Z"), now, now),
            Err(BackfillError::TooMany { .. })
        ));
    }
}
