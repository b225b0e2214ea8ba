//! Messages hidden soon, ten to a request: the first deliveries a crowded gate sends away
//! unclaimed ([`super::crowded`]). A worker scanning a backlog hides most of what it
//! receives; one `ChangeMessageVisibility` each made the scan as slow as the queue's
//! answers (three pollers met about 70 runs a second on LocalStack), and the walk that
//! waited for it held its place meanwhile.
//!
//! The walk hands its hide over and ends: its message is not acknowledged, so nothing is
//! lost if the hide never lands (a worker that dies first, a request refused): the
//! message comes back when the receive's own hiding runs out, and is looked at again.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::queue::JobQueue;

/// How long a hide waits for others to go with it.
const HIDE_GATHER: Duration = Duration::from_millis(20);

/// The hides waiting to be sent, and the task that sends them (started by the first).
#[derive(Debug, Default)]
pub(crate) struct Hides {
    sender: OnceLock<mpsc::UnboundedSender<(String, i32)>>,
}

impl Hides {
    /// Hides the message `receipt` for `secs` seconds soon, with the others hidden within
    /// [`HIDE_GATHER`] of it. Whether it was handed over; not when the task that sends
    /// them has ended with the runtime that started it (the caller hides it itself).
    pub fn hide(&self, queue: &Arc<dyn JobQueue>, receipt: &str, secs: i32) -> bool {
        let sender = self.sender.get_or_init(|| {
            let (sender, hides) = mpsc::unbounded_channel();
            tokio::spawn(send_gathered(queue.clone(), hides));
            sender
        });
        sender.send((receipt.to_string(), secs)).is_ok()
    }
}

/// Sends the hides as they come, ten to a request, until every sender is gone.
async fn send_gathered(
    queue: Arc<dyn JobQueue>,
    mut hides: mpsc::UnboundedReceiver<(String, i32)>,
) {
    let mut ready = Vec::new();
    while hides.recv_many(&mut ready, 10).await > 0 {
        let until = tokio::time::Instant::now() + HIDE_GATHER;
        while ready.len() < 10 {
            let room = 10 - ready.len();
            let more = hides.recv_many(&mut ready, room);
            match tokio::time::timeout_at(until, more).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        match queue.change_visibility_batch(&ready).await {
            Ok(failed) if failed.is_empty() => {}
            Ok(failed) => {
                tracing::warn!(
                    failed = failed.len(),
                    "some messages sent away could not be hidden; they come back when their receive's hiding ends"
                )
            }
            Err(e) => {
                tracing::warn!(error = %e, "messages sent away could not be hidden; they come back when their receive's hiding ends")
            }
        }
        ready.clear();
    }
}
