//! Hiding a Lambda batch's messages for their jobs' leases, in one request.
//!
//! Lambda's event source receives with the queue's visibility timeout (six times the
//! function's timeout); a message whose invocation dies would stay hidden that long. The
//! poller asks for the longest lease at receive; in Lambda the batch is hidden right after
//! it arrives, each message for its own job's lease, with one
//! `ChangeMessageVisibilityBatch` (instead of one request per claimed message).

use aws_lambda_events::event::sqs::SqsMessage;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry;
use serde::Deserialize;

use crate::job::Registry;
use crate::retry::MAX_VISIBILITY;

/// The one field of an envelope this needs.
#[derive(Deserialize)]
struct JobOf<'a> {
    #[serde(borrow)]
    job: std::borrow::Cow<'a, str>,
}

/// Hides each message of `messages` whose job `registry` knows for that job's lease (best
/// effort: one that stays visible comes back after its current timeout, as before). Done
/// before any claim, so that a retry's own visibility, set later, wins.
pub async fn hide_for_leases(
    sqs: &Client,
    queue_url: &str,
    registry: &Registry,
    messages: &[SqsMessage],
) {
    let entries: Vec<_> = messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let receipt = m.receipt_handle.as_deref()?;
            let job = serde_json::from_str::<JobOf>(m.body.as_deref()?).ok()?.job;
            let lease = registry.get(&job)?.policy.lease;
            let secs = lease.min(MAX_VISIBILITY).as_secs_f64().ceil() as i32;
            ChangeMessageVisibilityBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(receipt)
                .visibility_timeout(secs)
                .build()
                .ok()
        })
        .collect();
    if entries.is_empty() {
        return;
    }
    match sqs
        .change_message_visibility_batch()
        .queue_url(queue_url)
        .set_entries(Some(entries))
        .send()
        .await
    {
        Ok(out) => {
            for f in &out.failed {
                tracing::warn!(
                    id = f.id,
                    code = f.code,
                    "could not change message visibility"
                );
            }
        }
        Err(e) => {
            tracing::warn!(error = %crate::aws::describe(&e), "could not change the batch's visibility");
        }
    }
}
