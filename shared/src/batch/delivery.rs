//! The delivery the worker's core works on, whichever way it arrived: Lambda's event
//! source hands over `SqsMessage`s, the poller the SDK's `Message`s, the simulation its
//! own queue's. Each is converted here, at the edge, into one neutral type, so that no step
//! of the pipeline knows which it was.

use std::collections::BTreeMap;

use aws_lambda_events::event::sqs::{SqsMessage, SqsMessageAttribute};

use crate::dead_letter::attr;
use crate::queue::Attribute;
use crate::store::Redrive;

/// Message attribute: how many times the run's message waited and was sent again.
pub const WAITS: &str = "schedkit.waits";

/// Message attribute: since when the run has waited for its job's limits, for which of its
/// attempts (`<attempt>@<epoch ms>`): set on the first copy sent again because a limit held
/// the run back, kept by the copies after it, so that `max_wait_seconds` counts the whole
/// wait; a later attempt (the copy hidden for a retry carries it still) waits afresh.
pub const WAITING_SINCE: &str = "schedkit.waiting-since";

/// Message attribute: the id of the delivery a copy sent again stands for (the first
/// copy's). The claim records and compares that id, so the store knows the copy for the
/// same delivery: a run that FAILED on it, whose answer was lost, is dead-lettered when
/// the copy comes, not answered as another message's duplicate (which left it without a
/// letter: the simulation's seed 65507).
pub(crate) const ORIGIN: &str = "schedkit.origin";

/// One received copy of a message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivery {
    /// The queue's id of this copy (empty when the source gave none).
    pub message_id: String,
    /// What acknowledges or hides this copy; None when the source gave none.
    pub receipt_handle: Option<String>,
    /// The envelope's text.
    pub body: String,
    /// How many times this copy was received (SQS's `ApproximateReceiveCount`; 1 when
    /// the source did not say).
    pub receive_count: u32,
    /// Its message attributes: a redrive's mark, a waiting run's count, a copy's origin,
    /// the trigger's `traceparent`.
    pub attributes: BTreeMap<String, Attribute>,
    /// SQS's `AWSTraceHeader` system attribute (X-Ray), when the sender traced.
    pub trace_header: Option<String>,
    /// Its `MessageGroupId` (SQS's fair queues, `flow::message_group`), which a copy sent
    /// again keeps.
    pub message_group: Option<String>,
    /// The ARN of the queue Lambda's event source received it from (a function reads the
    /// jobs queue and the urgent one beside it); None from the poller, which knows.
    pub source_queue: Option<String>,
}

impl Delivery {
    /// The text of a string or number attribute.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.attributes.get(name)?.string.as_deref()
    }

    /// The trigger's span this copy carries: its `traceparent` attribute, else the X-Ray
    /// header SQS passed on.
    pub(crate) fn carried_span(&self) -> Option<crate::telemetry::trace_ids::RemoteSpan> {
        use crate::telemetry::trace_ids::{RemoteSpan, TRACEPARENT};
        self.text(TRACEPARENT)
            .and_then(RemoteSpan::parse_traceparent)
            .or_else(|| {
                self.trace_header
                    .as_deref()
                    .and_then(RemoteSpan::parse_xray)
            })
    }

    /// The id of the delivery this copy stands for: its origin's when it is a copy sent
    /// again to come back later (see `requeue`), its own otherwise.
    pub(crate) fn origin_id(&self) -> &str {
        self.text(ORIGIN).unwrap_or(&self.message_id)
    }

    /// How many times this copy waited and was sent again.
    pub(crate) fn waits(&self) -> u32 {
        self.text(WAITS).and_then(|n| n.parse().ok()).unwrap_or(0)
    }

    /// Since when (epoch ms) the run's attempt `attempt` has waited for its job's limits,
    /// if it has.
    pub(crate) fn waiting_since(&self, attempt: u32) -> Option<i64> {
        let (of, since) = self.text(WAITING_SINCE)?.split_once('@')?;
        (of.parse::<u32>().ok()? == attempt)
            .then(|| since.parse().ok())
            .flatten()
    }

    /// Since when (epoch ms) the run has waited for its job's limits, and for which attempt,
    /// as the copy says, whichever attempt that was.
    pub(crate) fn waiting_since_any(&self) -> Option<(u32, i64)> {
        let (of, since) = self.text(WAITING_SINCE)?.split_once('@')?;
        Some((of.parse().ok()?, since.parse().ok()?))
    }

    /// How many times the run has looked so far: this copy's receives and the waits of the
    /// copies before it.
    pub(crate) fn looks(&self) -> u32 {
        self.receive_count.max(1).saturating_add(self.waits())
    }

    /// Whether this is a dead letter moved back to the jobs queue (a redrive), and of which
    /// failed round: it carries the reason the worker wrote on the letter (`dlq redrive` and
    /// SQS's message move task both keep a letter's attributes) and when its run failed.
    pub(crate) fn redrive(&self) -> Option<Redrive> {
        self.text(attr::REASON)?;
        Some(Redrive {
            failed_at: self.text(attr::FAILED_AT).map(str::to_owned),
        })
    }
}

fn receive_count(value: Option<&String>) -> u32 {
    value.and_then(|n| n.parse().ok()).unwrap_or(1)
}

impl From<SqsMessage> for Delivery {
    fn from(m: SqsMessage) -> Self {
        Delivery {
            receive_count: receive_count(m.attributes.get("ApproximateReceiveCount")),
            trace_header: m.attributes.get("AWSTraceHeader").cloned(),
            message_group: m.attributes.get("MessageGroupId").cloned(),
            source_queue: m.event_source_arn,
            message_id: m.message_id.unwrap_or_default(),
            receipt_handle: m.receipt_handle,
            body: m.body.unwrap_or_default(),
            attributes: m
                .message_attributes
                .iter()
                .map(|(k, v)| (k.clone(), event_attribute(v)))
                .collect(),
        }
    }
}

/// A Lambda event's message attribute as the queue keeps it.
fn event_attribute(a: &SqsMessageAttribute) -> Attribute {
    Attribute {
        data_type: a.data_type.clone().unwrap_or_else(|| "String".into()),
        string: a.string_value.clone(),
        binary: a.binary_value.as_ref().map(|b| b.0.clone()),
    }
}

impl From<aws_sdk_sqs::types::Message> for Delivery {
    fn from(m: aws_sdk_sqs::types::Message) -> Self {
        use aws_sdk_sqs::types::MessageSystemAttributeName as System;
        let system = m.attributes.unwrap_or_default();
        Delivery {
            receive_count: receive_count(system.get(&System::ApproximateReceiveCount)),
            trace_header: system.get(&System::AwsTraceHeader).cloned(),
            message_group: system.get(&System::MessageGroupId).cloned(),
            source_queue: None,
            message_id: m.message_id.unwrap_or_default(),
            receipt_handle: m.receipt_handle,
            body: m.body.unwrap_or_default(),
            attributes: m
                .message_attributes
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| {
                    let attribute = Attribute {
                        data_type: v.data_type,
                        string: v.string_value,
                        binary: v.binary_value.map(|b| b.into_inner()),
                    };
                    (k, attribute)
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(attributes: &[(&str, &str)], receives: Option<&str>) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.message_id = Some("m1".into());
        m.body = Some("{}".into());
        for (k, v) in attributes {
            let mut a = SqsMessageAttribute::default();
            a.string_value = Some(v.to_string());
            a.data_type = Some("String".into());
            m.message_attributes.insert(k.to_string(), a);
        }
        if let Some(n) = receives {
            m.attributes
                .insert("ApproximateReceiveCount".into(), n.into());
        }
        m
    }

    #[test]
    fn looks_count_this_copys_receives_and_the_earlier_copies_waits() {
        assert_eq!(Delivery::from(event(&[(WAITS, "4")], Some("2"))).looks(), 6);
        assert_eq!(Delivery::from(event(&[], None)).looks(), 1);
    }

    #[test]
    fn a_copy_stands_for_its_origin_and_a_first_copy_for_itself() {
        assert_eq!(Delivery::from(event(&[], None)).origin_id(), "m1");
        assert_eq!(
            Delivery::from(event(&[(ORIGIN, "m0")], None)).origin_id(),
            "m0"
        );
    }

    #[test]
    fn only_a_letter_with_its_reason_is_a_redrive() {
        assert_eq!(Delivery::from(event(&[], None)).redrive(), None);
        let letter = event(
            &[
                (attr::REASON, "permanent-error"),
                (attr::FAILED_AT, "2026-12-01T00:00:00Z"),
            ],
            None,
        );
        assert_eq!(
            Delivery::from(letter).redrive(),
            Some(Redrive {
                failed_at: Some("2026-12-01T00:00:00Z".into())
            })
        );
    }

    #[test]
    fn the_sdks_message_and_lambdas_event_become_the_same_delivery() {
        use aws_sdk_sqs::types::{Message, MessageAttributeValue, MessageSystemAttributeName};
        let sdk = Message::builder()
            .message_id("m1")
            .body("{}")
            .attributes(MessageSystemAttributeName::ApproximateReceiveCount, "3")
            .message_attributes(
                WAITS,
                MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value("2")
                    .build()
                    .unwrap(),
            )
            .build();
        assert_eq!(
            Delivery::from(sdk),
            Delivery::from(event(&[(WAITS, "2")], Some("3")))
        );
    }
}
