//! Hiding a Lambda batch's messages for their jobs' leases, in one request.
//!
//! Lambda's event source receives with the queue's visibility timeout (six times the
//! function's timeout); a message whose invocation dies would stay hidden that long. The
//! poller asks for the longest lease at receive; in Lambda the batch is hidden right after
//! it arrives, each message for its own job's lease, with one
//! `ChangeMessageVisibilityBatch` (instead of one request per claimed message).

use serde::Deserialize;

use super::delivery::Delivery;
use crate::job::Registry;
use crate::queue::JobQueue;
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
pub(crate) async fn hide_for_leases(
    queue: &dyn JobQueue,
    registry: &Registry,
    messages: &[Delivery],
) {
    let entries: Vec<(String, i32)> = messages
        .iter()
        .filter_map(|m| {
            let receipt = m.receipt_handle.clone()?;
            let job = serde_json::from_str::<JobOf>(&m.body).ok()?.job;
            let lease = registry.get(&job)?.policy.lease;
            Some((
                receipt,
                lease.min(MAX_VISIBILITY).as_secs_f64().ceil() as i32,
            ))
        })
        .collect();
    if entries.is_empty() {
        return;
    }
    match queue.change_visibility_batch(&entries).await {
        Ok(failed) => {
            for receipt in &failed {
                tracing::warn!(receipt, "could not change message visibility");
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not change the batch's visibility");
        }
    }
}
