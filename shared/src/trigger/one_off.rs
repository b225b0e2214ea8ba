//! One-off jobs: run a job once, at a given time or after a delay, with the same envelope
//! and key semantics as scheduled runs.
//!
//! Up to 15 minutes ahead the envelope goes straight to the queue with SQS `DelaySeconds`;
//! further ahead it becomes a one-time `at()` schedule that deletes itself after firing
//! (`ActionAfterCompletion: DELETE`), in the group `<catalog group>-once`, which schedule
//! sync never touches. A job whose target is a chain starts its state machine instead: now
//! with `StartExecution`, named after the execution key so a repeated fire starts one
//! execution; later through a one-time schedule that targets the state machine.

use aws_sdk_scheduler::types::{
    ActionAfterCompletion, FlexibleTimeWindow, FlexibleTimeWindowMode, Target,
};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

use super::template::{ATTEMPT_NUMBER, EXECUTION_ID, SCHEDULE_ARN};
use super::{TriggerError, once_group};
use crate::aws::{AwsError, AwsResultExt, SdkConfig};
use crate::envelope::Envelope;

/// SQS's longest message delay.
pub(crate) const MAX_DELAY_SECONDS: i64 = 900;

/// Whether a run at `at` goes through a one-time schedule rather than straight to its
/// target: further ahead than SQS can delay a message. Decided in milliseconds, in one
/// place, so a caller asking for the role never disagrees with [`enqueue`] about a run
/// 900.5 s ahead.
pub fn needs_schedule(at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    (at - now).num_milliseconds() > MAX_DELAY_SECONDS * 1000
}

/// Where a one-off run was put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueued {
    /// On the queue, invisible for `delay_seconds`.
    Queued {
        /// The SQS message id, to find the message or its dead letter.
        message_id: String,
        /// Seconds until it is delivered, 0-900, rounded up.
        delay_seconds: i32,
    },
    /// A one-time schedule that fires at the envelope's `scheduled_for`.
    Scheduled {
        /// The schedule group, `<catalog group>-once`.
        group: String,
        /// The schedule's name, `<job>-<12 hex digits>`; it deletes itself after firing.
        name: String,
    },
}

/// Where one-off runs go.
#[derive(Debug, Clone)]
pub struct OneOffTarget {
    /// The jobs queue's URL, for runs due within 15 minutes.
    pub queue_url: String,
    /// The jobs queue's ARN: the one-time schedule's target.
    pub queue_arn: String,
    /// The role the scheduler assumes to send to the queue (the template's scheduler role).
    pub role_arn: String,
    /// The catalog's schedule group; one-time schedules go to `<group>-once`.
    pub group: String,
    /// Where the scheduler puts a firing it cannot deliver; None: it drops it.
    pub dead_letter_arn: Option<String>,
}

pub use crate::key::execution_name;

/// Enqueues the envelope to run at its `scheduled_for` (now, or later).
pub async fn enqueue(
    sdk: &SdkConfig,
    target: &OneOffTarget,
    envelope: &Envelope,
    now: DateTime<Utc>,
) -> Result<Enqueued, TriggerError> {
    enqueue_traced(sdk, target, envelope, now, (None, None)).await
}

/// [`enqueue`], the message carrying `trigger` (the trigger's span) as its `traceparent`
/// attribute and `group` as its `MessageGroupId` (SQS's fair queues,
/// `flow::message_group`) when it goes straight to the queue (a one-time schedule can
/// carry neither).
pub async fn enqueue_traced(
    sdk: &SdkConfig,
    target: &OneOffTarget,
    envelope: &Envelope,
    now: DateTime<Utc>,
    (trigger, group): (
        Option<&crate::telemetry::trace_ids::RemoteSpan>,
        Option<&str>,
    ),
) -> Result<Enqueued, TriggerError> {
    let wait = (envelope.scheduled_for - now).num_milliseconds();
    if !needs_schedule(envelope.scheduled_for, now) {
        let delay_seconds = (wait.max(0) as f64 / 1000.0).ceil() as i32;
        let traceparent = trigger.map(|span| {
            aws_sdk_sqs::types::MessageAttributeValue::builder()
                .data_type("String")
                .string_value(span.traceparent())
                .build()
                .expect("type and value are set")
        });
        let out = aws_sdk_sqs::Client::new(sdk)
            .send_message()
            .queue_url(&target.queue_url)
            .message_body(envelope.to_json())
            .delay_seconds(delay_seconds)
            .set_message_group_id(group.map(str::to_owned))
            .set_message_attributes(traceparent.map(|v| {
                std::collections::HashMap::from([(
                    crate::telemetry::trace_ids::TRACEPARENT.to_string(),
                    v,
                )])
            }))
            .send()
            .await
            .aws("sending the envelope")?;
        return Ok(Enqueued::Queued {
            message_id: out.message_id.unwrap_or_default(),
            delay_seconds,
        });
    }
    let scheduler = &aws_sdk_scheduler::Client::new(sdk);
    let group = once_group(&target.group);
    ensure_group(scheduler, &group).await?;
    let name = format!(
        "{}-{}",
        envelope.job.chars().take(48).collect::<String>(),
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let at = envelope
        .scheduled_for
        .to_rfc3339_opts(SecondsFormat::Secs, true);
    let mut builder = Target::builder()
        .arn(&target.queue_arn)
        .role_arn(&target.role_arn)
        .input(one_time_input(envelope));
    if let Some(dlq) = &target.dead_letter_arn {
        builder = builder.dead_letter_config(
            aws_sdk_scheduler::types::DeadLetterConfig::builder()
                .arn(dlq)
                .build(),
        );
    }
    scheduler
        .create_schedule()
        .group_name(&group)
        .name(&name)
        .schedule_expression(format!("at({})", at.trim_end_matches('Z')))
        .schedule_expression_timezone("UTC")
        .description(format!("one-off run of {}", envelope.job))
        .flexible_time_window(
            FlexibleTimeWindow::builder()
                .mode(FlexibleTimeWindowMode::Off)
                .build()?,
        )
        .action_after_completion(ActionAfterCompletion::Delete)
        .target(builder.build()?)
        .send()
        .await
        .aws(format!("creating one-time schedule {group}/{name}"))?;
    Ok(Enqueued::Scheduled { group, name })
}

/// The envelope as a one-time schedule's input: its own values, plus the scheduler's
/// context attributes for the execution id, schedule and attempt.
pub(crate) fn one_time_input(envelope: &Envelope) -> String {
    let mut value = serde_json::to_value(envelope).expect("an envelope serialises");
    let map = value.as_object_mut().expect("an envelope is an object");
    map.insert("execution_id".into(), Value::String(EXECUTION_ID.into()));
    map.insert("schedule_arn".into(), Value::String(SCHEDULE_ARN.into()));
    map.insert("attempt".into(), Value::String(ATTEMPT_NUMBER.into()));
    value.to_string()
}

async fn ensure_group(
    scheduler: &aws_sdk_scheduler::Client,
    group: &str,
) -> Result<(), TriggerError> {
    match scheduler.get_schedule_group().name(group).send().await {
        Ok(_) => Ok(()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_not_found_exception()) =>
        {
            scheduler
                .create_schedule_group()
                .name(group)
                .send()
                .await
                .aws(format!("creating schedule group {group}"))?;
            Ok(())
        }
        Err(e) => Err(AwsError::of(format!("reading schedule group {group}"), &e).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_or_schedule_decision_is_made_in_milliseconds() {
        let now: DateTime<Utc> = "2026-12-01T12:00:00Z".parse().unwrap();
        let ms = chrono::Duration::milliseconds;
        assert!(
            !needs_schedule(now + ms(900_000), now),
            "900 s: SQS can delay it"
        );
        assert!(needs_schedule(now + ms(900_001), now));
        assert!(
            needs_schedule(now + ms(900_600), now),
            "900.6 s has 900 whole seconds"
        );
    }

    #[test]
    fn execution_names_are_valid_stable_and_distinct() {
        let a = execution_name("invoice:2026-10:acme");
        let b = execution_name("invoice_2026-10_acme");
        assert!(a.starts_with("invoice_2026-10_acme-"), "{a}");
        assert_ne!(a, b, "keys that read alike after replacement stay apart");
        assert_eq!(a, execution_name("invoice:2026-10:acme"));
        let long = execution_name(&"k".repeat(500));
        assert!(long.len() <= 80, "{}", long.len());
        assert!(
            long.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "{long}"
        );
    }
}
