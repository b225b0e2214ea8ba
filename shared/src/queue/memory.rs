//! The jobs queue in memory, for unit tests and the deterministic simulation: SQS's
//! semantics that the worker relies on, on `tokio::time` (paused in the simulation).
//!
//! - A received message is hidden for the visibility asked at receive, and comes back
//!   after it unless deleted or hidden again; each receive has a new receipt.
//! - A delete with a receipt of an earlier receive succeeds and deletes nothing, as SQS
//!   may do; a visibility change with such a receipt is refused.
//! - `ApproximateReceiveCount` counts receives; a message received more than
//!   `max_receives` times goes to the dead-letter list unhandled (the redrive policy).
//! - Sends may carry a delay; dead letters are kept in order.
//!
//! The simulation's faults act on it directly: a copy of a message (a duplicate
//! delivery), a visibility cut short.
//!
//! With [`MemoryQueue::with_urgent`] it has an urgent queue beside it, as SQS stages do
//! (see [`super::urgent`]): its receipts tagged, every call routed by the tag.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::time::{Duration, Instant};

use super::{Attribute, JobQueue, Outgoing, QueueCall, QueueError};
use crate::batch::Delivery;

/// One message as the queue holds it.
#[derive(Debug, Clone)]
pub struct Stored {
    /// Its id (`m<n>`).
    pub id: String,
    /// Its body.
    pub body: String,
    /// Its message attributes.
    pub attributes: BTreeMap<String, Attribute>,
    /// When it can be received next.
    pub visible_at: Instant,
    /// How many times it was received.
    pub receives: u32,
}

/// Everything the queue holds.
#[derive(Debug, Default)]
pub struct QueueState {
    /// Messages by sequence number (the order they were sent in).
    pub messages: BTreeMap<u64, Stored>,
    /// Dead letters, in the order they arrived: those the worker sent, and messages
    /// received more than `max_receives` times.
    pub dead_letters: Vec<Outgoing>,
    /// Messages deleted, by id.
    pub deleted: Vec<String>,
    next: u64,
    /// The receipt of each message's latest receive.
    receipts: HashMap<u64, String>,
}

/// The queue. Cheap to clone: clones share one state.
#[derive(Debug, Clone)]
pub struct MemoryQueue {
    state: Arc<Mutex<QueueState>>,
    max_receives: u32,
    urgent: Option<Arc<MemoryQueue>>,
    /// What its messages' ids start with (`m`; `u` in an urgent queue: SQS's ids are
    /// unique across queues, and the worker tells deliveries apart by them).
    prefix: &'static str,
    /// Wakes its long polls when a message is sent or its visibility changes: SQS answers
    /// a long poll as soon as a message is visible (a poll that looked every second kept a
    /// woken waiter's message up to a second in the queue).
    changed: Arc<Notify>,
}

impl MemoryQueue {
    /// An empty queue whose redrive policy moves a message after `max_receives` receives.
    pub fn new(max_receives: u32) -> Self {
        MemoryQueue {
            state: Arc::default(),
            max_receives,
            urgent: None,
            prefix: "m",
            changed: Arc::default(),
        }
    }

    /// The queue with an empty urgent queue beside it, of the same redrive policy.
    pub fn with_urgent(mut self) -> Self {
        let urgent = MemoryQueue {
            prefix: "u",
            ..MemoryQueue::new(self.max_receives)
        };
        self.urgent = Some(Arc::new(urgent));
        self
    }

    /// The urgent queue beside it, if it has one.
    pub fn urgent(&self) -> Option<&MemoryQueue> {
        self.urgent.as_deref()
    }

    /// The queue a receipt came from, and the receipt as that queue knows it.
    fn route<'a>(&'a self, receipt: &'a str) -> (&'a MemoryQueue, &'a str) {
        match (super::urgent::untagged(receipt), self.urgent.as_deref()) {
            ((true, r), Some(urgent)) => (urgent, r),
            _ => (self, receipt),
        }
    }

    /// The state, locked.
    pub fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `body` with no attributes, visible at once; its id.
    pub fn send_body(&self, body: &str) -> String {
        self.push(Outgoing {
            body: body.to_string(),
            attributes: BTreeMap::new(),
            delay_seconds: None,
            group: None,
        })
    }

    fn push(&self, message: Outgoing) -> String {
        let mut state = self.lock();
        let n = state.next;
        state.next += 1;
        let delay = Duration::from_secs(message.delay_seconds.unwrap_or(0).max(0) as u64);
        let id = format!("{}{n}", self.prefix);
        state.messages.insert(
            n,
            Stored {
                id: id.clone(),
                body: message.body,
                attributes: message.attributes,
                visible_at: Instant::now() + delay,
                receives: 0,
            },
        );
        drop(state);
        self.changed.notify_waiters();
        id
    }

    /// Receives up to `max` visible messages (oldest first), hiding each for `visibility`;
    /// a message past its receives goes to the dead letters instead.
    pub fn receive(&self, max: usize, visibility: Duration) -> Vec<Delivery> {
        let now = Instant::now();
        let mut state = self.lock();
        let visible: Vec<u64> = state
            .messages
            .iter()
            .filter(|(_, m)| m.visible_at <= now)
            .map(|(n, _)| *n)
            .collect();
        let mut out = Vec::new();
        for n in visible {
            if out.len() >= max {
                break;
            }
            let m = state.messages.get_mut(&n).expect("listed");
            if m.receives >= self.max_receives {
                let m = state.messages.remove(&n).expect("listed");
                state.dead_letters.push(Outgoing {
                    body: m.body,
                    attributes: m.attributes,
                    delay_seconds: None,
                    group: None,
                });
                continue;
            }
            m.receives += 1;
            m.visible_at = now + visibility;
            let receipt = format!("{}:{}", m.id, m.receives);
            let message = delivery(m, &receipt);
            state.receipts.insert(n, receipt);
            out.push(message);
        }
        out
    }

    /// A copy of the message `id` (a duplicate delivery), visible at once.
    pub fn duplicate(&self, id: &str) -> Option<String> {
        let copy = {
            let state = self.lock();
            let m = state.messages.values().find(|m| m.id == id)?;
            Outgoing {
                body: m.body.clone(),
                attributes: m.attributes.clone(),
                delay_seconds: None,
                group: None,
            }
        };
        Some(self.push(copy))
    }

    /// Moves the dead letter at `index` back to the queue with its attributes, as
    /// `dlq redrive` and SQS's message move task do; the new message's id.
    pub fn redrive(&self, index: usize) -> Option<String> {
        let letter = {
            let mut state = self.lock();
            (index < state.dead_letters.len()).then(|| state.dead_letters.remove(index))?
        };
        Some(self.push(Outgoing {
            delay_seconds: None,
            ..letter
        }))
    }

    /// Makes the message `id` visible now, whatever its visibility (one cut short).
    pub fn expose(&self, id: &str) {
        let now = Instant::now();
        let mut state = self.lock();
        if let Some(m) = state.messages.values_mut().find(|m| m.id == id) {
            m.visible_at = now;
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// The sequence number a live receipt names.
    fn live(&self, state: &QueueState, receipt: &str) -> Option<u64> {
        let (id, _) = receipt.split_once(':')?;
        let n: u64 = id.strip_prefix(self.prefix)?.parse().ok()?;
        (state.receipts.get(&n).map(String::as_str) == Some(receipt)).then_some(n)
    }

    fn hide(&self, receipt: &str, seconds: i32) -> Result<(), QueueError> {
        let (queue, receipt) = self.route(receipt);
        let now = Instant::now();
        let mut state = queue.lock();
        let n = queue
            .live(&state, receipt)
            .filter(|n| state.messages.contains_key(n))
            .ok_or_else(|| QueueError(format!("receipt {receipt} is not the message's latest")))?;
        let m = state.messages.get_mut(&n).expect("checked");
        m.visible_at = now + Duration::from_secs(seconds.max(0) as u64);
        drop(state);
        queue.changed.notify_waiters();
        Ok(())
    }

    /// When the next hidden message becomes visible, if one is hidden.
    fn next_visible(&self, now: Instant) -> Option<Instant> {
        let state = self.lock();
        let hidden = state.messages.values().map(|m| m.visible_at);
        hidden.filter(|at| *at > now).min()
    }
}

/// The message as the worker takes it.
fn delivery(m: &Stored, receipt: &str) -> Delivery {
    Delivery {
        message_id: m.id.clone(),
        receipt_handle: Some(receipt.to_string()),
        body: m.body.clone(),
        receive_count: m.receives,
        attributes: m.attributes.clone(),
        trace_header: None,
        message_group: None,
        source_queue: None,
    }
}

impl JobQueue for MemoryQueue {
    fn change_visibility<'a>(
        &'a self,
        receipt: &'a str,
        seconds: i32,
    ) -> QueueCall<'a, Result<(), QueueError>> {
        Box::pin(async move { self.hide(receipt, seconds) })
    }

    fn change_visibility_batch<'a>(
        &'a self,
        entries: &'a [(String, i32)],
    ) -> QueueCall<'a, Result<Vec<String>, QueueError>> {
        Box::pin(async move {
            Ok(entries
                .iter()
                .filter(|(receipt, seconds)| self.hide(receipt, *seconds).is_err())
                .map(|(receipt, _)| receipt.clone())
                .collect())
        })
    }

    fn send<'a>(&'a self, message: &'a Outgoing) -> QueueCall<'a, Result<(), QueueError>> {
        Box::pin(async move {
            self.push(message.clone());
            Ok(())
        })
    }

    fn delete<'a>(&'a self, receipt: &'a str) -> QueueCall<'a, Result<(), QueueError>> {
        Box::pin(async move {
            let (queue, receipt) = self.route(receipt);
            let mut state = queue.lock();
            // A receipt of an earlier receive: accepted, nothing deleted.
            if let Some(n) = queue.live(&state, receipt)
                && let Some(m) = state.messages.remove(&n)
            {
                state.deleted.push(m.id);
            }
            Ok(())
        })
    }

    fn send_again<'a>(
        &'a self,
        receipt: Option<&'a str>,
        message: &'a Outgoing,
    ) -> QueueCall<'a, Result<(), QueueError>> {
        let queue = receipt.map_or(self, |r| self.route(r).0);
        Box::pin(async move {
            queue.push(message.clone());
            Ok(())
        })
    }

    fn dead_letter<'a>(&'a self, letter: &'a Outgoing) -> QueueCall<'a, Result<(), QueueError>> {
        Box::pin(async move {
            self.lock().dead_letters.push(letter.clone());
            Ok(())
        })
    }

    fn receive_urgent<'a>(
        &'a self,
        most: usize,
        wait_seconds: i32,
        hidden_for: Option<i32>,
    ) -> Option<QueueCall<'a, Result<Vec<Delivery>, QueueError>>> {
        let urgent = self.urgent.as_deref()?;
        Some(Box::pin(async move {
            let mut got = JobQueue::receive(urgent, most, wait_seconds, hidden_for).await?;
            for d in &mut got {
                d.receipt_handle = d.receipt_handle.as_deref().map(super::urgent::tagged);
            }
            Ok(got)
        }))
    }

    /// Waits until a message is visible or `wait_seconds` have passed, as a long poll
    /// answers when the first message arrives.
    fn receive<'a>(
        &'a self,
        most: usize,
        wait_seconds: i32,
        hidden_for: Option<i32>,
    ) -> QueueCall<'a, Result<Vec<Delivery>, QueueError>> {
        Box::pin(async move {
            let hidden =
                Duration::from_secs(hidden_for.unwrap_or(DEFAULT_VISIBILITY).max(0) as u64);
            let until = Instant::now() + Duration::from_secs(wait_seconds.max(0) as u64);
            loop {
                let changed = self.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                let received = MemoryQueue::receive(self, most, hidden);
                let now = Instant::now();
                if !received.is_empty() || now >= until {
                    return Ok(received);
                }
                let next = self.next_visible(now).map_or(until, |at| at.min(until));
                tokio::select! {
                    () = changed => {}
                    () = tokio::time::sleep_until(next) => {}
                }
            }
        })
    }

    fn delete_batch<'a>(
        &'a self,
        receipts: &'a [String],
    ) -> QueueCall<'a, Result<u64, QueueError>> {
        Box::pin(async move {
            let mut deleted = 0;
            for receipt in receipts {
                self.delete(receipt).await?;
                deleted += 1;
            }
            Ok(deleted)
        })
    }

    fn drained<'a>(&'a self) -> QueueCall<'a, Result<bool, QueueError>> {
        Box::pin(async move {
            let urgent = self.urgent.as_deref();
            Ok(self.lock().messages.is_empty()
                && urgent.is_none_or(|u| u.lock().messages.is_empty()))
        })
    }
}

/// SQS's default visibility timeout, for a receive that names none.
const DEFAULT_VISIBILITY: i32 = 30;

#[cfg(test)]
mod tests {
    use super::*;

    /// The poller's side of the memory queue: a long poll, what it hides, deleting, drained.
    #[tokio::test(start_paused = true)]
    async fn a_long_poll_answers_when_a_message_arrives_and_hides_it_as_asked() {
        let queue = MemoryQueue::new(5);
        let started = Instant::now();
        let sender = queue.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            sender.send_body("{}");
        });
        let got = JobQueue::receive(&queue, 10, 20, Some(7)).await.unwrap();
        assert_eq!(got.len(), 1, "the message that arrived during the wait");
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(3) && waited < Duration::from_secs(5),
            "answered when it arrived, not at the end of the wait: {waited:?}"
        );
        assert!(
            JobQueue::receive(&queue, 10, 0, None)
                .await
                .unwrap()
                .is_empty(),
            "hidden for the seconds asked"
        );
        tokio::time::sleep(Duration::from_secs(7)).await;
        let again = JobQueue::receive(&queue, 10, 0, None).await.unwrap();
        assert_eq!(again.len(), 1, "visible again after them");
        assert_eq!(again[0].receive_count, 2);
        assert!(!queue.drained().await.unwrap());
        let receipts = vec![again[0].receipt_handle.clone().unwrap()];
        assert_eq!(queue.delete_batch(&receipts).await.unwrap(), 1);
        assert!(queue.drained().await.unwrap(), "nothing left once deleted");
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_long_poll_answers_nothing_after_its_wait() {
        let queue = MemoryQueue::new(5);
        let started = Instant::now();
        let got = JobQueue::receive(&queue, 10, 20, None).await.unwrap();
        assert!(got.is_empty());
        assert_eq!(started.elapsed(), Duration::from_secs(20));
    }
}
