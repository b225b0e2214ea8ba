//! The worker outside Lambda: long-poll the queue and feed the same batch adapter, message
//! by message, up to its concurrency at once, receiving again as soon as one finishes.
//!
//! Semantics match the Lambda event source mapping with partial batch responses: every
//! acknowledged message is deleted, every other one is left to come back (after the
//! visibility the adapter set, or the queue's default).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsMessage;
use aws_sdk_sqs::Client;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::batch::{Delivery, MessageReport, Processor};
use crate::queue::{JobQueue, QueueCall, QueueError, SqsQueue};
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
    /// Hears each message's report as it finishes (the simulation traces and tallies
    /// them; a poller killed mid-run has no [`PollStats`] to give).
    pub on_report: Option<OnReport>,
}

/// What hears each report: [`PollOptions::on_report`].
#[derive(Clone)]
pub struct OnReport(pub Arc<dyn Fn(&MessageReport) + Send + Sync>);

impl fmt::Debug for OnReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnReport(..)")
    }
}

impl Default for PollOptions {
    fn default() -> Self {
        PollOptions {
            wait_seconds: 20,
            max_messages: 10,
            until_drained: false,
            keep_reports: false,
            on_report: None,
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

/// Polls the processor's queue until `shutdown` resolves (or, with `until_drained`, until
/// the queue is empty). It receives and deletes through [`JobQueue`]: SQS when the
/// processor was made with [`Processor::new`], the simulation's queue in memory.
///
/// Up to the processor's `concurrency` messages are in hand at once, each handled on its
/// own: a receive for as many as there is room for goes out as soon as room frees (see
/// `Room`), so a long job never holds back the messages the worker could run beside it.
/// Each message is deleted soon after its outcome is durable (see `acknowledge`). The
/// messages in hand when shutdown comes are finished first.
pub async fn poll(
    processor: &Processor,
    options: &PollOptions,
    shutdown: impl Future<Output = ()>,
) -> PollStats {
    let queue = processor.queue();
    processor.start_waiting_in_hand();
    let (done, finished) = tokio::sync::mpsc::unbounded_channel();
    let receiving = async move {
        let mut stats = PollStats::default();
        let mut in_hand: JoinSet<MessageReport> = JoinSet::new();
        let mut receive: Option<Receive<'_>> = None;
        let mut asked = 0;
        let mut urgent = Urgent::Open(None);
        let mut room = Room::new(processor.config().concurrency, options.max_messages);
        let mut look_again: Option<Instant> = None;
        tokio::pin!(shutdown);
        loop {
            if receive.is_none() {
                (look_again, asked) =
                    fill_room(&mut room, &mut receive, in_hand.len(), processor, options);
            }
            urgent.keep_open(processor, options, room.urgent_room(in_hand.len() + asked));
            let event = tokio::select! {
                biased;
                _ = &mut shutdown => break,
                Some(joined) = in_hand.join_next(), if !in_hand.is_empty() => Event::Finished(joined),
                received = async {
                    match receive.as_mut() {
                        Some(r) => r.await,
                        None => std::future::pending().await,
                    }
                } => Event::Received(received),
                received = urgent.answer() => Event::ReceivedUrgent(received),
                () = async {
                    match look_again {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => Event::LookAgain,
            };
            let received = match event {
                Event::Finished(joined) => {
                    tally(&mut stats, joined, options);
                    continue;
                }
                Event::LookAgain => continue,
                Event::Received(received) => {
                    (receive, asked) = (None, 0);
                    received
                }
                Event::ReceivedUrgent(received) => Ok(urgent.answered(received)),
            };
            let messages = match received {
                Ok(messages) => messages,
                Err(e) => {
                    tracing::warn!(error = %e, "receive failed; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if messages.is_empty()
                && options.until_drained
                && in_hand.is_empty()
                && queue.drained().await.unwrap_or(false)
            {
                break;
            }
            stats.received += messages.len() as u64;
            take_in_hand(&mut in_hand, processor, messages, &done);
        }
        // Runs waiting in hand for a permit join their gates' lines instead.
        processor.stop_waiting_in_hand();
        // What the receives in flight bring is not left hidden for a lease.
        release_late(queue, receive, urgent).await;
        // The messages in hand are finished first: outcomes written, acknowledged.
        while let Some(joined) = in_hand.join_next().await {
            tally(&mut stats, joined, options);
        }
        // The runs sent away are hidden until their turns, not for the longest lease.
        processor.flush_hides().await;
        drop(done);
        stats
    };
    let (mut stats, deleted) = tokio::join!(receiving, acknowledge(queue, finished));
    stats.deleted = deleted;
    stats
}

/// Sends a receive if the room has a place for one (no receive is in flight): when to
/// look at the room again, if the room waits to gather more, and how many it asked for.
fn fill_room<'a>(
    room: &mut Room,
    receive: &mut Option<Receive<'a>>,
    in_hand: usize,
    processor: &'a Processor,
    options: &'a PollOptions,
) -> (Option<Instant>, usize) {
    match room.next(in_hand, Instant::now(), processor.runs_waiting_in_hand()) {
        Next::Receive(most) => {
            *receive = Some(receive_request(processor, options, most));
            (None, most)
        }
        Next::LookAgainAt(at) => (Some(at), 0),
        Next::Wait => (None, 0),
    }
}

/// Waits for the receives still in flight as the poller stops and makes what they bring
/// visible again at once: dropped, a receive SQS had answered would leave its messages
/// hidden for the longest lease.
async fn release_late(queue: &dyn JobQueue, receive: Option<Receive<'_>>, urgent: Urgent<'_>) {
    let mut late = Vec::new();
    for r in [receive, urgent.in_flight()].into_iter().flatten() {
        late.extend(r.await.unwrap_or_default());
    }
    let entries: Vec<(String, i32)> = late
        .into_iter()
        .filter_map(|d| d.receipt_handle)
        .map(|r| (r, 0))
        .collect();
    for ten in entries.chunks(10) {
        if let Err(e) = queue.change_visibility_batch(ten).await {
            tracing::warn!(error = %e, "messages received as the poller stopped stay hidden until their visibility runs out");
        }
    }
}

/// A receive for at most `most` messages. A received message stays hidden for the longest
/// lease: a poller killed mid-run has its messages back after about that long (heartbeats
/// extend it while a job runs).
fn receive_request<'a>(
    processor: &'a Processor,
    options: &'a PollOptions,
    most: usize,
) -> Receive<'a> {
    processor
        .queue()
        .receive(most, options.wait_seconds, hidden_for(processor))
}

/// How long a received message stays hidden: the longest lease (see [`receive_request`]).
fn hidden_for(processor: &Processor) -> Option<i32> {
    processor.registry().longest_lease().map(|lease| {
        lease
            .as_secs_f64()
            .ceil()
            .clamp(1.0, MAX_VISIBILITY.as_secs() as f64) as i32
    })
}

/// The receive kept open on the urgent queue (see [`crate::queue::urgent`]): whatever the
/// jobs queue holds, one long poll waits there, and what it brings is taken in hand at
/// once. It may fill one receive's worth of places beyond the concurrency ([`Room::urgent_room`]):
/// an urgent run never waits for a busy worker's places, and the messages in hand never
/// pass the concurrency and one receive.
enum Urgent<'a> {
    /// Read: the receive in flight, if one was sent.
    Open(Option<Receive<'a>>),
    /// A receive failed: read again from then.
    Resting(Instant),
    /// No urgent queue beside the jobs queue (or the worker may not read one).
    Closed,
}

/// How long the poller leaves the urgent queue alone after a receive from it failed (the
/// jobs queue is read meanwhile).
const URGENT_REST: Duration = Duration::from_secs(5);

impl<'a> Urgent<'a> {
    /// Sends a receive for up to `room` messages when none is in flight.
    fn keep_open(&mut self, processor: &'a Processor, options: &'a PollOptions, room: usize) {
        if let Urgent::Resting(at) = self
            && Instant::now() >= *at
        {
            *self = Urgent::Open(None);
        }
        if let Urgent::Open(None) = self
            && room > 0
        {
            let wait = options.wait_seconds;
            *self = match processor
                .queue()
                .receive_urgent(room, wait, hidden_for(processor))
            {
                Some(r) => Urgent::Open(Some(r)),
                None => Urgent::Closed,
            };
        }
    }

    /// The receive's answer; never, with none in flight.
    async fn answer(&mut self) -> Result<Vec<Delivery>, QueueError> {
        match self {
            Urgent::Open(Some(r)) => r.await,
            _ => std::future::pending().await,
        }
    }

    /// What an answer brought. A queue that is not there (or may not be read: a stage
    /// deployed before it had urgent queues) is closed, said once; another failure rests.
    fn answered(&mut self, answer: Result<Vec<Delivery>, QueueError>) -> Vec<Delivery> {
        match answer {
            Ok(messages) => {
                *self = Urgent::Open(None);
                messages
            }
            Err(e) if crate::queue::urgent::absent(&e.0) => {
                tracing::warn!(error = %e, "no urgent queue to read beside the jobs queue: urgent runs wait in the jobs queue (deploy the template again to have it)");
                *self = Urgent::Closed;
                Vec::new()
            }
            Err(e) => {
                tracing::warn!(error = %e, "receive from the urgent queue failed; reading it again in 5 s");
                *self = Urgent::Resting(Instant::now() + URGENT_REST);
                Vec::new()
            }
        }
    }

    /// The receive in flight, if any.
    fn in_flight(self) -> Option<Receive<'a>> {
        match self {
            Urgent::Open(r) => r,
            _ => None,
        }
    }
}

/// How long a poller with room for less than a whole receive waits for more before
/// receiving: messages that finish close together are refilled by one receive, not one
/// each, and a long job in hand leaves its neighbours' places idle no longer than this.
const RECEIVE_GATHER: Duration = Duration::from_millis(50);

/// The same, while more runs of this worker wait in hand for limits of one share than it
/// has places free: a message received now would most likely wait beside them, and
/// receives of one or two messages each (a place freed at every 50 ms body's end) made
/// 0.67 SQS requests a run under a shared limit of 4, on a LocalStack whose request rate
/// bounds the limit's pace. The cost: a run of another job received meanwhile starts up
/// to 150 ms later than it would have.
const RECEIVE_GATHER_WAITING: Duration = Duration::from_millis(200);

/// When the poller receives, and how many: the policy alone, without a queue.
///
/// An idle poller, or one with room for a whole receive (ten, or its concurrency if less),
/// receives at once. Less room is filled [`RECEIVE_GATHER`] after it first opened, with as
/// many as fit: a long job in hand never keeps the other places waiting for it, and short
/// jobs are still received several to a request (a receive per freed place cost the
/// benchmark 0.56 SQS requests per delivery instead of 0.32); beside more runs waiting in
/// hand for a limit than places free, [`RECEIVE_GATHER_WAITING`] after.
#[derive(Debug, Clone)]
pub(crate) struct Room {
    capacity: usize,
    whole: usize,
    /// Since when its room has been less than a whole receive.
    opened: Option<Instant>,
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
            opened: None,
        }
    }

    /// How many the urgent queue's receive may ask for with `taken` places in hand or asked
    /// for: up to one receive's worth beyond the capacity.
    pub(crate) fn urgent_room(&self, taken: usize) -> usize {
        (self.capacity + self.whole)
            .saturating_sub(taken)
            .min(self.whole)
    }

    /// With `in_hand` messages at `now`, and no receive in flight; `waiting`: the runs of
    /// this worker waiting in hand for limits of one share. While more wait than places
    /// are free, the room is gathered longer ([`RECEIVE_GATHER_WAITING`]): they keep the
    /// permits busy until then, and are refilled by one receive before they run out.
    pub(crate) fn next(&mut self, in_hand: usize, now: Instant, waiting: usize) -> Next {
        let room = self.capacity.saturating_sub(in_hand);
        if room == 0 {
            self.opened = None;
            return Next::Wait;
        }
        if room >= self.whole || in_hand == 0 {
            self.opened = None;
            return Next::Receive(room.min(self.whole));
        }
        let opened = *self.opened.get_or_insert(now);
        let gather = if waiting > room {
            RECEIVE_GATHER_WAITING
        } else {
            RECEIVE_GATHER
        };
        let at = opened + gather;
        if now >= at {
            self.opened = None;
            return Next::Receive(room);
        }
        Next::LookAgainAt(at)
    }
}

/// A receive request in flight.
type Receive<'a> = QueueCall<'a, Result<Vec<Delivery>, QueueError>>;

/// What the poller waits for.
enum Event {
    /// A message in hand has its report.
    Finished(Result<MessageReport, tokio::task::JoinError>),
    /// Time to look at the room again.
    LookAgain,
    /// A receive answered.
    Received(Result<Vec<Delivery>, QueueError>),
    /// The urgent queue's receive answered.
    ReceivedUrgent(Result<Vec<Delivery>, QueueError>),
}

/// Counts one finished message in `stats`.
fn tally(
    stats: &mut PollStats,
    joined: Result<MessageReport, tokio::task::JoinError>,
    options: &PollOptions,
) {
    match joined {
        Ok(report) => {
            *stats.outcomes.entry(report.outcome.label()).or_default() += 1;
            if let Some(OnReport(hear)) = &options.on_report {
                hear(&report);
            }
            if options.keep_reports {
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
/// `DeleteMessageBatch` takes most of them instead of a request per few messages. At
/// 50 ms, under a limit that starts one run at a time (a shared limit of 4 on a 50 ms job,
/// three pollers on LocalStack), a request took 1.8 messages: 0.55 SQS requests a run for
/// deletes alone. A message left undeleted that long costs nothing but a duplicate if its
/// poller dies, answered by the store as one.
const DELETE_GATHER: Duration = Duration::from_millis(250);

/// Deletes each acknowledged message soon after its outcome is durable (with those that
/// finish within [`DELETE_GATHER`] of it, ten to a request), until the channel closes; how
/// many were deleted. A poller that dies leaves only its unfinished messages to come back,
/// and those of its last quarter second, which the store answers as duplicates.
async fn acknowledge(
    queue: &dyn JobQueue,
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
        deleted += delete_acknowledged_in(queue, &ready).await;
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
    messages: Vec<Delivery>,
    done: &tokio::sync::mpsc::UnboundedSender<MessageReport>,
) {
    for message in messages {
        let (processor, done) = (processor.clone(), done.clone());
        in_hand.spawn(async move {
            // Boxed, so that the spawned future is small (see `DynamoStore::timed`).
            let report = Box::pin(processor.handle(message, "")).await;
            let _ = done.send(report.clone());
            report
        });
    }
}

/// Deletes the acknowledged messages of a batch from the SQS queue `queue_url` (what
/// Lambda does after a partial batch response); returns how many were deleted.
pub async fn delete_acknowledged(sqs: &Client, queue_url: &str, reports: &[MessageReport]) -> u64 {
    let queue = SqsQueue::new(sqs.clone(), queue_url, "");
    delete_acknowledged_in(&queue, reports).await
}

/// Deletes the acknowledged messages of a batch from `queue`, ten to a request; how many
/// were deleted. One that could not be is harmless: it comes back as a duplicate.
async fn delete_acknowledged_in(queue: &dyn JobQueue, reports: &[MessageReport]) -> u64 {
    let receipts: Vec<String> = reports
        .iter()
        // A copy sent again to come back later was deleted when it was sent.
        .filter(|r| r.outcome.acknowledged() && !r.outcome.deleted())
        .filter_map(|r| r.receipt_handle.clone())
        .collect();
    let mut deleted = 0;
    for ten in receipts.chunks(10) {
        match queue.delete_batch(ten).await {
            Ok(n) => deleted += n,
            Err(e) => {
                tracing::warn!(error = %e, "delete batch failed; messages will come back as duplicates");
            }
        }
    }
    deleted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_poller_receives_a_whole_receives_worth() {
        let mut room = Room::new(32, 10);
        assert_eq!(room.next(0, Instant::now(), 0), Next::Receive(10));
        let mut small = Room::new(3, 10);
        assert_eq!(small.next(0, Instant::now(), 0), Next::Receive(3));
    }

    #[test]
    fn room_for_a_whole_receive_is_filled_at_once() {
        let mut room = Room::new(20, 10);
        let now = Instant::now();
        assert_eq!(room.next(10, now, 0), Next::Receive(10));
        assert_eq!(room.next(20, now, 0), Next::Wait);
    }

    #[test]
    fn messages_that_finish_together_are_refilled_by_one_receive() {
        let mut room = Room::new(10, 10);
        let t0 = Instant::now();
        // One place freed: wait a moment for the others finishing with it.
        assert_eq!(room.next(9, t0, 0), Next::LookAgainAt(t0 + RECEIVE_GATHER));
        // They did: all ten at once.
        assert_eq!(
            room.next(0, t0 + Duration::from_millis(5), 0),
            Next::Receive(10)
        );
    }

    /// Ten places, one held by a long job: the nine others are refilled a moment after
    /// they free up, never held until the long job ends.
    #[test]
    fn beside_a_long_job_a_little_room_is_refilled_after_a_moment() {
        let mut room = Room::new(10, 10);
        let t0 = Instant::now();
        let at = match room.next(1, t0, 0) {
            Next::LookAgainAt(at) => at,
            other => panic!("{other:?}"),
        };
        assert_eq!(at, t0 + RECEIVE_GATHER);
        assert_eq!(
            room.next(1, t0 + Duration::from_millis(5), 0),
            Next::LookAgainAt(at)
        );
        assert_eq!(room.next(1, at, 0), Next::Receive(9));
        // Four of those nine end: four places, filled after a moment too.
        let later = at + Duration::from_secs(1);
        assert_eq!(
            room.next(6, later, 0),
            Next::LookAgainAt(later + RECEIVE_GATHER)
        );
        assert_eq!(room.next(6, later + RECEIVE_GATHER, 0), Next::Receive(4));
        assert_eq!(room.next(10, later, 0), Next::Wait);
    }

    /// While more runs wait in hand for limits of one share than places are free, a freed
    /// place is refilled after a longer gather, with the places freed meanwhile; once as
    /// many are free as wait, after the usual one. An idle poller or a whole receive's room
    /// is still refilled at once.
    #[test]
    fn beside_runs_waiting_in_hand_room_is_gathered_longer() {
        let mut room = Room::new(10, 10);
        let t0 = Instant::now();
        let long = Next::LookAgainAt(t0 + RECEIVE_GATHER_WAITING);
        assert_eq!(room.next(9, t0, 6), long);
        assert_eq!(room.next(8, t0 + RECEIVE_GATHER, 5), long);
        assert_eq!(
            room.next(6, t0 + RECEIVE_GATHER_WAITING, 3),
            Next::Receive(4)
        );
        // As many free as wait: the usual gather.
        assert_eq!(
            room.next(9, t0, 6),
            Next::LookAgainAt(t0 + RECEIVE_GATHER_WAITING)
        );
        assert_eq!(
            room.next(5, t0 + Duration::from_millis(10), 5),
            Next::LookAgainAt(t0 + RECEIVE_GATHER)
        );
        assert_eq!(room.next(5, t0 + RECEIVE_GATHER, 5), Next::Receive(5));
        assert_eq!(room.next(0, t0, 9), Next::Receive(10));
        let mut wide = Room::new(30, 10);
        assert_eq!(wide.next(20, t0, 20), Next::Receive(10));
    }
}
