//! The worker outside Lambda: long-poll the queue and feed the same batch adapter, message
//! by message, up to its concurrency at once, receiving again as soon as one finishes.
//!
//! Semantics match the Lambda event source mapping with partial batch responses: every
//! acknowledged message is deleted, every other one is left to come back (after the
//! visibility the adapter set, or the queue's default).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::SqsMessage;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};

use tokio::task::JoinSet;

use crate::aws::describe;
use crate::batch::{Delivery, MessageReport, Processor};
use crate::retry::MAX_VISIBILITY;

/// How to poll.
#[derive(Debug, Clone)]
pub struct PollOptions {
    /// Long-poll wait per receive, 0..=20 seconds.
    pub wait_seconds: i32,
    /// Messages per receive, 1..=10.
    pub max_messages: i32,
    /// Stop once the queue holds nothing at all: no visible, in-flight or delayed message.
    pub until_drained: bool,
    /// Keep every message's report in [`PollStats::reports`] (tests read them). Off by
    /// default: a worker polling for days would hold one per message it ever handled.
    pub keep_reports: bool,
}

impl Default for PollOptions {
    fn default() -> Self {
        PollOptions {
            wait_seconds: 20,
            max_messages: 10,
            until_drained: false,
            keep_reports: false,
        }
    }
}

/// What a polling run saw.
#[derive(Debug, Clone, Default)]
pub struct PollStats {
    /// Messages received over the whole run, redeliveries counted each time.
    pub received: u64,
    /// Messages deleted after an acknowledged outcome; a failed delete comes back as a duplicate.
    pub deleted: u64,
    /// Reports by outcome label (`succeeded`, `duplicate`, ...).
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Every report, in the order processed, with [`PollOptions::keep_reports`].
    pub reports: Vec<MessageReport>,
}

/// Polls until `shutdown` resolves (or, with `until_drained`, until the queue is empty).
///
/// Up to the processor's `concurrency` messages are in hand at once, each handled on its
/// own: a receive for as many as there is room for goes out as soon as room frees (see
/// `Room`), so a long job never holds back the messages the worker could run beside it.
/// Each message is deleted soon after its outcome is durable (see `acknowledge`). The
/// messages in hand when shutdown comes are finished first.
pub async fn poll(
    processor: &Processor,
    sqs: &Client,
    options: &PollOptions,
    shutdown: impl Future<Output = ()>,
) -> PollStats {
    let queue_url = processor.config().queue_url.clone();
    let (done, finished) = tokio::sync::mpsc::unbounded_channel();
    let receiving = async move {
        let mut stats = PollStats::default();
        let mut in_hand: JoinSet<MessageReport> = JoinSet::new();
        let mut receive: Option<Pin<Box<Receive<'_>>>> = None;
        let mut room = Room::new(processor.config().concurrency, options.max_messages);
        let mut look_again: Option<Instant> = None;
        tokio::pin!(shutdown);
        loop {
            if receive.is_none() {
                look_again = None;
                match room.next(in_hand.len(), Instant::now()) {
                    Next::Receive(most) => {
                        receive = Some(receive_request(processor, sqs, options, most));
                    }
                    Next::LookAgainAt(at) => look_again = Some(at),
                    Next::Wait => {}
                }
            }
            let event = tokio::select! {
                biased;
                _ = &mut shutdown => break,
                Some(joined) = in_hand.join_next(), if !in_hand.is_empty() => Event::Finished(joined),
                received = async {
                    match receive.as_mut() {
                        Some(r) => r.await,
                        None => std::future::pending().await,
                    }
                } => Event::Received(Box::new(received)),
                () = async {
                    match look_again {
                        Some(at) => tokio::time::sleep_until(at.into()).await,
                        None => std::future::pending().await,
                    }
                } => Event::LookAgain,
            };
            let received = match event {
                Event::Finished(joined) => {
                    tally(&mut stats, joined, options.keep_reports);
                    continue;
                }
                Event::LookAgain => continue,
                Event::Received(received) => {
                    receive = None;
                    *received
                }
            };
            let messages = match received {
                Ok(out) => out.messages.unwrap_or_default(),
                Err(e) => {
                    tracing::warn!(error = %describe(&e), "receive failed; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if messages.is_empty()
                && options.until_drained
                && in_hand.is_empty()
                && drained(sqs, &queue_url).await
            {
                break;
            }
            stats.received += messages.len() as u64;
            take_in_hand(&mut in_hand, processor, messages, &done);
        }
        // The messages in hand are finished first: outcomes written, acknowledged.
        while let Some(joined) = in_hand.join_next().await {
            tally(&mut stats, joined, options.keep_reports);
        }
        drop(done);
        stats
    };
    let ack_url = processor.config().queue_url.clone();
    let (mut stats, deleted) = tokio::join!(receiving, acknowledge(sqs, &ack_url, finished));
    stats.deleted = deleted;
    stats
}

/// A receive for at most `most` messages. A received message stays hidden for the longest
/// lease: a poller killed mid-run has its messages back after about that long (heartbeats
/// extend it while a job runs).
fn receive_request<'a>(
    processor: &'a Processor,
    sqs: &'a Client,
    options: &'a PollOptions,
    most: usize,
) -> Pin<Box<Receive<'a>>> {
    let hidden_for = processor.registry().longest_lease().map(|lease| {
        lease
            .as_secs_f64()
            .ceil()
            .clamp(1.0, MAX_VISIBILITY.as_secs() as f64) as i32
    });
    Box::pin(
        sqs.receive_message()
            .queue_url(&processor.config().queue_url)
            .max_number_of_messages(i32::try_from(most).unwrap_or(10))
            .wait_time_seconds(options.wait_seconds)
            .set_visibility_timeout(hidden_for)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send(),
    )
}

/// How long a poller with room for less than a whole receive waits for more before
/// receiving: messages that finish close together are refilled by one receive, not one
/// each, and a long job in hand leaves its neighbours' places idle no longer than this.
const RECEIVE_GATHER: Duration = Duration::from_millis(50);

/// When the poller receives, and how many: the policy alone, without a queue.
///
/// An idle poller, or one with room for a whole receive (ten, or its concurrency if less),
/// receives at once. Less room is filled [`RECEIVE_GATHER`] after it first opened, with as
/// many as fit: a long job in hand never keeps the other places waiting for it, and short
/// jobs are still received several to a request (a receive per freed place cost the
/// benchmark 0.56 SQS requests per delivery instead of 0.32).
#[derive(Debug, Clone)]
pub(crate) struct Room {
    capacity: usize,
    whole: usize,
    gather_until: Option<Instant>,
}

/// What the poller does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Receive at most this many.
    Receive(usize),
    /// Look again then (or when a message finishes).
    LookAgainAt(Instant),
    /// Wait for a message to finish.
    Wait,
}

impl Room {
    pub(crate) fn new(concurrency: usize, max_messages: i32) -> Room {
        let capacity = concurrency.max(1);
        let per_receive = usize::try_from(max_messages).unwrap_or(1).clamp(1, 10);
        Room {
            capacity,
            whole: per_receive.min(capacity),
            gather_until: None,
        }
    }

    /// With `in_hand` messages at `now`, and no receive in flight.
    pub(crate) fn next(&mut self, in_hand: usize, now: Instant) -> Next {
        let room = self.capacity.saturating_sub(in_hand);
        if room == 0 {
            self.gather_until = None;
            return Next::Wait;
        }
        if room >= self.whole || in_hand == 0 {
            self.gather_until = None;
            return Next::Receive(room.min(self.whole));
        }
        match self.gather_until {
            Some(at) if now >= at => {
                self.gather_until = None;
                Next::Receive(room)
            }
            Some(at) => Next::LookAgainAt(at),
            None => {
                let at = now + RECEIVE_GATHER;
                self.gather_until = Some(at);
                Next::LookAgainAt(at)
            }
        }
    }
}

/// A receive request in flight.
type Receive<'a> = dyn Future<
        Output = Result<
            aws_sdk_sqs::operation::receive_message::ReceiveMessageOutput,
            aws_sdk_sqs::error::SdkError<
                aws_sdk_sqs::operation::receive_message::ReceiveMessageError,
            >,
        >,
    > + Send
    + 'a;

/// What the poller waits for.
enum Event {
    /// A message in hand has its report.
    Finished(Result<MessageReport, tokio::task::JoinError>),
    /// Time to look at the room again.
    LookAgain,
    /// A receive answered (boxed: an SDK answer is large beside a report).
    Received(
        Box<
            Result<
                aws_sdk_sqs::operation::receive_message::ReceiveMessageOutput,
                aws_sdk_sqs::error::SdkError<
                    aws_sdk_sqs::operation::receive_message::ReceiveMessageError,
                >,
            >,
        >,
    ),
}

/// Counts one finished message in `stats`.
fn tally(stats: &mut PollStats, joined: Result<MessageReport, tokio::task::JoinError>, keep: bool) {
    match joined {
        Ok(report) => {
            *stats.outcomes.entry(report.outcome.label()).or_default() += 1;
            if keep {
                stats.reports.push(report);
            }
        }
        // A bug in the adapter itself: the message is left to come back.
        Err(e) => {
            tracing::error!(error = %e, "message task failed");
            *stats.outcomes.entry("unavailable").or_default() += 1;
        }
    }
}

/// How long a finished message waits for others to finish, so that one
/// `DeleteMessageBatch` takes most of them instead of a request per few messages.
const DELETE_GATHER: Duration = Duration::from_millis(50);

/// Deletes each acknowledged message soon after its outcome is durable (with those that
/// finish within [`DELETE_GATHER`] of it, ten to a request), until the channel closes; how
/// many were deleted. A poller that dies leaves only its unfinished messages to come back,
/// and those of its last few milliseconds, which the store answers as duplicates.
async fn acknowledge(
    sqs: &Client,
    queue_url: &str,
    mut finished: tokio::sync::mpsc::UnboundedReceiver<MessageReport>,
) -> u64 {
    let (mut deleted, mut ready) = (0, Vec::new());
    while finished.recv_many(&mut ready, 10).await > 0 {
        let until = tokio::time::Instant::now() + DELETE_GATHER;
        while ready.len() < 10 {
            let room = 10 - ready.len();
            let more = finished.recv_many(&mut ready, room);
            match tokio::time::timeout_at(until, more).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        deleted += delete_acknowledged(sqs, queue_url, &ready).await;
        ready.clear();
    }
    deleted
}

/// The SDK's message in the shape Lambda's event source mapping delivers.
pub fn to_event_message(m: aws_sdk_sqs::types::Message) -> SqsMessage {
    let mut out = SqsMessage::default();
    out.message_id = m.message_id;
    out.receipt_handle = m.receipt_handle;
    out.body = m.body;
    out.md5_of_body = m.md5_of_body;
    out.attributes = m
        .attributes
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k.as_str().to_string(), v))
        .collect::<HashMap<_, _>>();
    out.message_attributes = m
        .message_attributes
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, event_attribute(v)))
        .collect();
    out.event_source = Some("aws:sqs".into());
    out
}

/// The SDK's message attribute in the shape Lambda's event carries it (a redrive's mark
/// and a waiting run's count are read from these).
fn event_attribute(
    v: aws_sdk_sqs::types::MessageAttributeValue,
) -> aws_lambda_events::event::sqs::SqsMessageAttribute {
    let mut a = aws_lambda_events::event::sqs::SqsMessageAttribute::default();
    a.string_value = v.string_value;
    a.binary_value = v.binary_value.map(|b| {
        let mut data = aws_lambda_events::encodings::Base64Data::default();
        *data = b.into_inner();
        data
    });
    a.data_type = Some(v.data_type);
    a
}

/// Starts handling each received message on its own; each report goes to `done` (to be
/// acknowledged) as soon as its outcome is durable.
fn take_in_hand(
    in_hand: &mut JoinSet<MessageReport>,
    processor: &Processor,
    messages: Vec<aws_sdk_sqs::types::Message>,
    done: &tokio::sync::mpsc::UnboundedSender<MessageReport>,
) {
    for message in messages.into_iter().map(Delivery::from) {
        let (processor, done) = (processor.clone(), done.clone());
        in_hand.spawn(async move {
            // Boxed, so that the spawned future is small (see `DynamoStore::timed`).
            let report = Box::pin(processor.handle(message, "")).await;
            let _ = done.send(report.clone());
            report
        });
    }
}

/// Deletes the acknowledged messages of a batch (what Lambda does after a partial batch
/// response); returns how many were deleted.
pub async fn delete_acknowledged(sqs: &Client, queue_url: &str, reports: &[MessageReport]) -> u64 {
    let entries: Vec<_> = reports
        .iter()
        .enumerate()
        // A copy sent again to come back later was deleted when it was sent.
        .filter(|(_, r)| r.outcome.acknowledged() && !r.outcome.deleted())
        .filter_map(|(i, r)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(r.receipt_handle.clone()?)
                .build()
                .ok()
        })
        .collect();
    if entries.is_empty() {
        return 0;
    }
    match sqs
        .delete_message_batch()
        .queue_url(queue_url)
        .set_entries(Some(entries))
        .send()
        .await
    {
        Ok(out) => {
            for f in &out.failed {
                // Harmless: the message comes back and is acknowledged as a duplicate.
                tracing::warn!(id = f.id, code = f.code, "delete failed");
            }
            out.successful.len() as u64
        }
        Err(e) => {
            tracing::warn!(error = %describe(&e), "delete batch failed; messages will come back as duplicates");
            0
        }
    }
}

/// True when the queue holds no message at all, counting in-flight and delayed ones.
pub async fn drained(sqs: &Client, queue_url: &str) -> bool {
    let counts = [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        QueueAttributeName::ApproximateNumberOfMessagesDelayed,
    ];
    let Ok(out) = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .set_attribute_names(Some(counts.to_vec()))
        .send()
        .await
    else {
        return false;
    };
    let attrs = out.attributes.unwrap_or_default();
    counts.iter().all(|c| attrs.get(c).is_none_or(|v| v == "0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_poller_receives_a_whole_receives_worth() {
        let mut room = Room::new(32, 10);
        assert_eq!(room.next(0, Instant::now()), Next::Receive(10));
        let mut small = Room::new(3, 10);
        assert_eq!(small.next(0, Instant::now()), Next::Receive(3));
    }

    #[test]
    fn room_for_a_whole_receive_is_filled_at_once() {
        let mut room = Room::new(20, 10);
        let now = Instant::now();
        assert_eq!(room.next(10, now), Next::Receive(10));
        assert_eq!(room.next(20, now), Next::Wait);
    }

    #[test]
    fn messages_that_finish_together_are_refilled_by_one_receive() {
        let mut room = Room::new(10, 10);
        let t0 = Instant::now();
        // One place freed: wait a moment for the others finishing with it.
        assert_eq!(room.next(9, t0), Next::LookAgainAt(t0 + RECEIVE_GATHER));
        // They did: all ten at once.
        assert_eq!(
            room.next(0, t0 + Duration::from_millis(5)),
            Next::Receive(10)
        );
    }

    /// Ten places, one held by a long job: the nine others are refilled a moment after
    /// they free up, never held until the long job ends.
    #[test]
    fn beside_a_long_job_a_little_room_is_refilled_after_a_moment() {
        let mut room = Room::new(10, 10);
        let t0 = Instant::now();
        let at = match room.next(1, t0) {
            Next::LookAgainAt(at) => at,
            other => panic!("{other:?}"),
        };
        assert_eq!(at, t0 + RECEIVE_GATHER);
        assert_eq!(
            room.next(1, t0 + Duration::from_millis(5)),
            Next::LookAgainAt(at)
        );
        assert_eq!(room.next(1, at), Next::Receive(9));
        // Four of those nine end: four places, filled after a moment too.
        let later = at + Duration::from_secs(1);
        assert_eq!(
            room.next(6, later),
            Next::LookAgainAt(later + RECEIVE_GATHER)
        );
        assert_eq!(room.next(6, later + RECEIVE_GATHER), Next::Receive(4));
        assert_eq!(room.next(10, later), Next::Wait);
    }
}
