//! The jobs queue as the worker sees it: what it does to a message it received (hide it
//! longer, delete it, send it again to come back later) and where dead letters go.
//!
//! The worker's logic (`batch`) calls only this interface, so that it runs the same over
//! SQS ([`SqsQueue`]: what ships, one request per call, as before the interface) and over
//! an in-memory queue (the deterministic simulation). Receiving is not here: the poller
//! and Lambda's event source receive, each in its own way, and hand the worker messages.

mod memory;
mod sqs;
pub mod urgent;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

pub use memory::{MemoryQueue, QueueState, Stored};

use crate::batch::Delivery;
pub use sqs::SqsQueue;

/// A queue call in flight.
pub(crate) type QueueCall<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A message attribute as SQS keeps it: a data type (`String`, `Number`, `Binary`, with an
/// optional custom suffix) and a string or binary value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// `String`, `Number` or `Binary` (`String.json`...).
    pub data_type: String,
    /// The value of a string or number attribute.
    pub string: Option<String>,
    /// The value of a binary attribute.
    pub binary: Option<Vec<u8>>,
}

impl Attribute {
    /// A `String` attribute.
    pub fn text(value: impl Into<String>) -> Attribute {
        Attribute {
            data_type: "String".into(),
            string: Some(value.into()),
            binary: None,
        }
    }

    /// A `Number` attribute.
    pub fn number(value: impl std::fmt::Display) -> Attribute {
        Attribute {
            data_type: "Number".into(),
            string: Some(value.to_string()),
            binary: None,
        }
    }
}

/// A message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// Its body, as received (the envelope's text).
    pub body: String,
    /// Its message attributes (at most SQS's ten).
    pub attributes: BTreeMap<String, Attribute>,
    /// Seconds before it can be received (0 to 900); None: the queue's own delay.
    pub delay_seconds: Option<i32>,
    /// Its `MessageGroupId` (SQS's fair queues, `flow::message_group`): a copy sent again
    /// keeps its message's.
    pub group: Option<String>,
}

/// A queue call that did not happen; the message is as it was.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct QueueError(pub String);

/// What the worker does to messages. Every receipt is one the worker received.
pub trait JobQueue: Send + Sync + std::fmt::Debug + 'static {
    /// Hides the received message `receipt` for `seconds` from now.
    fn change_visibility<'a>(
        &'a self,
        receipt: &'a str,
        seconds: i32,
    ) -> QueueCall<'a, Result<(), QueueError>>;

    /// Hides several received messages, each for its own seconds (one request on SQS);
    /// the receipts that could not be changed.
    fn change_visibility_batch<'a>(
        &'a self,
        entries: &'a [(String, i32)],
    ) -> QueueCall<'a, Result<Vec<String>, QueueError>>;

    /// Sends a message to the jobs queue.
    fn send<'a>(&'a self, message: &'a Outgoing) -> QueueCall<'a, Result<(), QueueError>>;

    /// Sends a copy of the received message `receipt` (to come back later) to the queue
    /// it came from: the jobs queue, or the urgent queue beside it.
    fn send_again<'a>(
        &'a self,
        receipt: Option<&'a str>,
        message: &'a Outgoing,
    ) -> QueueCall<'a, Result<(), QueueError>> {
        let _ = receipt;
        self.send(message)
    }

    /// Deletes the received message `receipt` from the jobs queue.
    fn delete<'a>(&'a self, receipt: &'a str) -> QueueCall<'a, Result<(), QueueError>>;

    /// Sends a dead letter to the dead-letter queue.
    fn dead_letter<'a>(&'a self, letter: &'a Outgoing) -> QueueCall<'a, Result<(), QueueError>>;

    /// Receives up to `most` messages (1 to 10), waiting up to `wait_seconds` for one to
    /// arrive (a long poll), each hidden for `hidden_for` seconds (None: the queue's own
    /// visibility timeout).
    fn receive<'a>(
        &'a self,
        most: usize,
        wait_seconds: i32,
        hidden_for: Option<i32>,
    ) -> QueueCall<'a, Result<Vec<Delivery>, QueueError>>;

    /// As [`JobQueue::receive`], from the urgent queue beside the jobs queue (see
    /// [`urgent`]); None when there is none.
    fn receive_urgent<'a>(
        &'a self,
        most: usize,
        wait_seconds: i32,
        hidden_for: Option<i32>,
    ) -> Option<QueueCall<'a, Result<Vec<Delivery>, QueueError>>> {
        let _ = (most, wait_seconds, hidden_for);
        None
    }

    /// Makes a copy another source received (Lambda's event source) the queue's own: a
    /// copy from the urgent queue has its receipt tagged so that every call reaches it.
    fn adopt(&self, delivery: &mut Delivery) {
        let _ = delivery;
    }

    /// Deletes up to ten received messages (one request on SQS); how many were deleted.
    /// A receipt that could not be deleted is harmless: its message comes back and is
    /// answered as a duplicate.
    fn delete_batch<'a>(&'a self, receipts: &'a [String])
    -> QueueCall<'a, Result<u64, QueueError>>;

    /// Whether the queue holds no message at all, in-flight and delayed ones counted.
    fn drained<'a>(&'a self) -> QueueCall<'a, Result<bool, QueueError>>;
}
