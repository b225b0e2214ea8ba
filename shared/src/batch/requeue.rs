//! Coming back later without counting as a receive. A delivery that must wait (its job's
//! overlap slot is taken, a Lambda invocation is too near its deadline to start it, or
//! another worker holds the run's lease, after its first few looks) is sent again with its
//! wait as the new copy's delay and the copy in hand deleted at once (send, then delete: a
//! crash between leaves a duplicate, never a loss), instead of being hidden:
//! SQS counts every receive of a message toward the queue's `maxReceiveCount`, and a run that
//! waits long enough would otherwise reach the DLQ with no reason while its record says it
//! is still to run. The new copy carries the message's attributes (a redrive's mark stays)
//! and how many times it has waited (`schedkit.waits`), which spaces the looks out.

use std::collections::BTreeMap;
use std::time::Duration;

use super::delivery::{Delivery, ORIGIN, WAITING_SINCE, WAITS};
use super::pipeline::MessageCtx;
use super::processor::Processor;
use crate::dead_letter::attr;
use crate::queue::{Attribute, Outgoing};
use crate::retry::MAX_VISIBILITY;

/// Looks for which a delivery in progress elsewhere is hidden instead of sent again: a
/// hide is one request and most runs end within a few seconds; these few receives are
/// within the margin the template's `maxReceiveCount` keeps beyond a job's attempts.
pub(super) const HIDDEN_LOOKS: u32 = 3;

/// SQS's longest delay on a message.
const MAX_DELAY: Duration = Duration::from_secs(900);

/// SQS's most message attributes on a message.
const MAX_ATTRIBUTES: usize = 10;

/// What a dead letter says only for the operator who reads it: a redriven letter's copy sent
/// again leaves them behind (the mark of a redrive, its reason and failure time, stays), so
/// that SQS's ten attributes leave room for the wait's own.
const LETTER_ONLY: [&str; 6] = [
    attr::ERROR,
    attr::JOB,
    attr::KEY,
    attr::ATTEMPTS,
    attr::SOURCE_QUEUE,
    attr::SOURCE_MESSAGE_ID,
];

/// The attributes of the copy sent again: the delivery's own (less what only its letter
/// said), its waits counted, its origin named and, for a run that waits for its limits,
/// since when and for which attempt (when SQS's ten attributes leave room).
fn attributes_again(
    delivery: &Delivery,
    waiting_since: Option<(u32, i64)>,
) -> BTreeMap<String, Attribute> {
    let mut out = delivery.attributes.clone();
    out.retain(|name, _| !LETTER_ONLY.contains(&name.as_str()));
    if out.contains_key(WAITS) || out.len() < MAX_ATTRIBUTES {
        let counted = Attribute::number(delivery.waits().saturating_add(1));
        out.insert(WAITS.into(), counted);
    }
    if !out.contains_key(ORIGIN) && out.len() < MAX_ATTRIBUTES && !delivery.message_id.is_empty() {
        out.insert(ORIGIN.into(), Attribute::text(&delivery.message_id));
    }
    if let Some((attempt, since)) = waiting_since
        && (out.contains_key(WAITING_SINCE) || out.len() < MAX_ATTRIBUTES)
    {
        let value = Attribute::text(format!("{attempt}@{since}"));
        out.insert(WAITING_SINCE.into(), value);
    }
    out
}

impl Processor {
    /// Sends the message again to come back after `delay` (at most SQS's 15 minutes; a
    /// longer wait looks again then), then deletes the copy in hand; true when sent. The
    /// delete is not left to the end of a Lambda batch: a batch that outlives the copy's
    /// visibility would let it be received, and sent again, a second time. When the send
    /// fails, the copy in hand is hidden for `delay` instead.
    pub(super) async fn come_back(&self, ctx: &MessageCtx<'_>, delay: Duration) -> bool {
        self.come_back_waiting(ctx, delay, None).await
    }

    /// [`Processor::come_back`] for a run whose attempt `since.0` has waited for its limits
    /// since `since.1` (epoch ms), which the copy carries.
    pub(super) async fn come_back_waiting(
        &self,
        ctx: &MessageCtx<'_>,
        delay: Duration,
        since: Option<(u32, i64)>,
    ) -> bool {
        let again = Outgoing {
            body: ctx.delivery.body.clone(),
            attributes: attributes_again(ctx.delivery, since),
            delay_seconds: Some(delay.min(MAX_DELAY).as_secs_f64().ceil() as i32),
            group: ctx.delivery.message_group.clone(),
        };
        match self.inner.queue.send_again(ctx.receipt(), &again).await {
            Ok(()) => {
                if let Some(receipt) = ctx.receipt()
                    && let Err(e) = self.inner.queue.delete(receipt).await
                {
                    // Acknowledged anyway: the copy sent again is the run's now, and this
                    // one, should it come back, is decided like any duplicate.
                    tracing::warn!(error = %e, "the copy sent again is on its way; the one in hand was not deleted");
                }
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not send the waiting message again; hiding it instead");
                self.hide(ctx, delay).await;
                false
            }
        }
    }

    /// The queue the copy in hand came from (its dead letter names it, and a redrive
    /// sends it back there): the jobs queue, or the urgent queue beside it.
    pub(super) fn source_queue(&self, ctx: &MessageCtx<'_>) -> String {
        let queue = &self.inner.config.queue_url;
        match ctx.receipt().map(crate::queue::urgent::untagged) {
            Some((true, _)) => crate::queue::urgent::urgent_queue_of(queue),
            _ => queue.clone(),
        }
    }

    /// [`Processor::hide`], gathered with other hides into one request
    /// ([`super::hides`]): the walk does not wait for it.
    pub(super) async fn hide_soon(&self, ctx: &MessageCtx<'_>, delay: Duration) {
        let Some(receipt) = ctx.receipt() else {
            return;
        };
        let secs = delay.min(MAX_VISIBILITY).as_secs_f64().ceil() as i32;
        if !self.inner.hides.hide(&self.inner.queue, receipt, secs) {
            self.hide(ctx, delay).await;
        }
    }

    /// Hides the message for `delay` so it comes back then (best effort: if this fails it
    /// comes back after its current visibility timeout instead).
    pub(super) async fn hide(&self, ctx: &MessageCtx<'_>, delay: Duration) {
        let Some(receipt) = ctx.receipt() else {
            return;
        };
        let secs = delay.min(MAX_VISIBILITY).as_secs_f64().ceil() as i32;
        if let Err(e) = self.inner.queue.change_visibility(receipt, secs).await {
            tracing::warn!(error = %e, "could not change message visibility");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(attributes: &[(&str, &str)]) -> Delivery {
        Delivery {
            message_id: "m1".into(),
            attributes: attributes
                .iter()
                .map(|(k, v)| (k.to_string(), Attribute::text(*v)))
                .collect(),
            ..Delivery::default()
        }
    }

    #[test]
    fn a_copy_sent_again_keeps_the_messages_attributes_and_counts_its_waits() {
        let m = delivery(&[(attr::REASON, "permanent-error"), (WAITS, "2")]);
        let again = attributes_again(&m, None);
        assert_eq!(
            again[attr::REASON].string.as_deref(),
            Some("permanent-error"),
            "a redrive's mark stays"
        );
        assert_eq!(again[WAITS], Attribute::number(3));
        let fresh = delivery(&[]);
        assert_eq!(attributes_again(&fresh, None)[WAITS], Attribute::number(1));
    }

    #[test]
    fn a_copy_sent_again_stands_for_its_first_delivery() {
        let first = delivery(&[]);
        let again = attributes_again(&first, None);
        assert_eq!(again[ORIGIN], Attribute::text("m1"));
        let mut copy = delivery(&[(ORIGIN, "m1")]);
        copy.message_id = "m2".into();
        assert_eq!(copy.origin_id(), "m1");
        assert_eq!(
            attributes_again(&copy, None)[ORIGIN],
            Attribute::text("m1"),
            "a copy of a copy"
        );
        assert_eq!(first.origin_id(), "m1");
    }

    #[test]
    fn a_redriven_letters_copy_keeps_its_mark_and_has_room_for_its_wait() {
        let letter: Vec<(&str, &str)> = vec![
            (attr::REASON, "limit-wait"),
            (attr::FAILED_AT, "2026-12-01T00:00:00Z"),
            (attr::ERROR, "waited"),
            (attr::JOB, "j"),
            (attr::KEY, "k"),
            (attr::ATTEMPTS, "1"),
            (attr::SOURCE_QUEUE, "q"),
            (attr::SOURCE_MESSAGE_ID, "m0"),
        ];
        let again = attributes_again(&delivery(&letter), Some((2, 1_000)));
        let copy = Delivery {
            attributes: again,
            ..Delivery::default()
        };
        assert!(copy.redrive().is_some(), "still a redrive");
        assert_eq!(copy.waiting_since(2), Some(1_000));
        assert_eq!(copy.waiting_since(3), None, "a later attempt waits afresh");
        assert_eq!(copy.waits(), 1);
    }

    #[test]
    fn ten_attributes_of_its_own_leave_no_room_to_count_waits() {
        let own: Vec<(String, String)> = (0..10).map(|i| (format!("a{i}"), "v".into())).collect();
        let refs: Vec<(&str, &str)> = own.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let again = attributes_again(&delivery(&refs), None);
        assert_eq!(again.len(), 10);
        assert!(!again.contains_key(WAITS));
    }
}
