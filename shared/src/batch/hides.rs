//! Messages hidden soon, ten to a request: the first deliveries a crowded gate sends away
//! unclaimed ([`super::crowded`]). A worker scanning a backlog hides most of what it
//! receives; one `ChangeMessageVisibility` each made the scan as slow as the queue's
//! answers (three pollers met about 70 runs a second on LocalStack), and the walk that
//! waited for it held its place meanwhile.
//!
//! The walk hands its hide over and ends: its message is not acknowledged, so nothing is
//! lost if the hide never lands (a worker that dies first): the message comes back when
//! the receive's own hiding runs out (the longest lease), and is looked at again. A batch
//! the queue refuses is hidden message by message; a poller that stops sends what is
//! gathered before it returns ([`Hides::flush`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::queue::JobQueue;

/// How long a hide waits for others to go with it.
const HIDE_GATHER: Duration = Duration::from_millis(20);

/// What the gathering task is handed.
enum Hide {
    /// A receipt, hidden for so many seconds.
    Message(String, i32),
    /// Send what is gathered now, and say so.
    Flush(oneshot::Sender<()>),
}

/// The hides waiting to be sent, and the task that sends them (started by the first).
#[derive(Debug, Default)]
pub(crate) struct Hides {
    sender: OnceLock<mpsc::UnboundedSender<Hide>>,
}

impl std::fmt::Debug for Hide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hide::Message(_, secs) => write!(f, "Message({secs} s)"),
            Hide::Flush(_) => write!(f, "Flush"),
        }
    }
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
        sender
            .send(Hide::Message(receipt.to_string(), secs))
            .is_ok()
    }

    /// Sends every hide handed over so far, and returns once they are sent (at once when
    /// none ever was).
    pub async fn flush(&self) {
        let Some(sender) = self.sender.get() else {
            return;
        };
        let (done, sent) = oneshot::channel();
        if sender.send(Hide::Flush(done)).is_ok() {
            let _ = sent.await;
        }
    }
}

/// Sends the hides as they come, ten to a request (a flush sends at once), until every
/// sender is gone.
async fn send_gathered(queue: Arc<dyn JobQueue>, mut hides: mpsc::UnboundedReceiver<Hide>) {
    let mut handed = Vec::new();
    while hides.recv_many(&mut handed, 10).await > 0 {
        let until = tokio::time::Instant::now() + HIDE_GATHER;
        while handed.len() < 10 && !handed.iter().any(|h| matches!(h, Hide::Flush(_))) {
            let room = 10 - handed.len();
            let more = hides.recv_many(&mut handed, room);
            match tokio::time::timeout_at(until, more).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let mut ready = Vec::new();
        let mut flushed = Vec::new();
        for hide in handed.drain(..) {
            match hide {
                Hide::Message(receipt, secs) => ready.push((receipt, secs)),
                Hide::Flush(done) => flushed.push(done),
            }
        }
        send(queue.as_ref(), &ready).await;
        for done in flushed {
            let _ = done.send(());
        }
    }
}

/// One batch of hides; refused whole, each alone. A receipt the queue no longer knows
/// (its message deleted or received again) is left: its hide no longer matters.
async fn send(queue: &dyn JobQueue, ready: &[(String, i32)]) {
    if ready.is_empty() {
        return;
    }
    match queue.change_visibility_batch(ready).await {
        Ok(failed) if failed.is_empty() => {}
        Ok(failed) => {
            tracing::warn!(
                failed = failed.len(),
                "some messages sent away could not be hidden (received again or deleted meanwhile)"
            );
        }
        Err(e) => {
            tracing::warn!(error = %e, "a batch of hides was refused; hiding each alone");
            for (receipt, secs) in ready {
                if let Err(e) = queue.change_visibility(receipt, *secs).await {
                    tracing::warn!(error = %e, "a message sent away could not be hidden; it comes back when its receive's hiding ends");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::MemoryQueue;

    #[tokio::test(start_paused = true)]
    async fn a_flush_sends_the_hides_gathered_before_it_returns() {
        let memory = MemoryQueue::new(5);
        memory.send_body("{}");
        let received = memory.receive(1, Duration::from_secs(3_600));
        let receipt = received[0].receipt_handle.clone().unwrap();
        let queue: Arc<dyn JobQueue> = Arc::new(memory.clone());
        let hides = Hides::default();
        assert!(hides.hide(&queue, &receipt, 2));
        hides.flush().await;
        let soon = tokio::time::Instant::now() + Duration::from_secs(3);
        let visible_at = memory.lock().messages.values().next().unwrap().visible_at;
        assert!(
            visible_at < soon,
            "hidden for its 2 s, not the receive's hour"
        );
    }
}
