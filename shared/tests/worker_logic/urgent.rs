//! The urgent queue beside the jobs queue, as the poller reads it (`schedkit::queue::urgent`):
//! an urgent run starts though a backlog fills the jobs queue and the worker's places, the
//! worker never holds more than its concurrency and one receive, and a stage without an
//! urgent queue is read as one queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use schedkit::batch::Delivery;
use schedkit::poller::{self, PollOptions};
use schedkit::queue::{JobQueue, MemoryQueue, Outgoing, QueueError};
use schedkit::store::MemoryStore;
use schedkit::{Ctx, JobPolicy, Jobs, Metrics, Processor, Status};
use serde_json::json;

use super::{config, envelope};

/// Bodies running now, and the most ever at once.
#[derive(Default)]
struct Running {
    now: AtomicUsize,
    most: AtomicUsize,
}

/// A poller of concurrency 2 over `queue`, its one-second job counting bodies in
/// `running`, until the queues are drained.
async fn poll_until_drained(store: &MemoryStore, queue: &MemoryQueue, running: &Arc<Running>) {
    let counted = running.clone();
    let registry = Jobs::new()
        .add("slow", move |_ctx: Ctx| {
            let running = counted.clone();
            async move {
                let now = running.now.fetch_add(1, Ordering::SeqCst) + 1;
                running.most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(1)).await;
                running.now.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, schedkit::JobError>(json!(null))
            }
        })
        .bind_policies(|_| JobPolicy::default());
    let mut config = config();
    config.concurrency = 2;
    let processor = Processor::with_queue(
        store.clone(),
        queue.clone(),
        registry,
        config,
        Metrics::capture().0,
    );
    let options = PollOptions {
        wait_seconds: 1,
        until_drained: true,
        ..PollOptions::default()
    };
    poller::poll(&processor, &options, std::future::pending()).await;
}

#[tokio::test(start_paused = true)]
async fn an_urgent_run_behind_a_backlog_starts_within_its_first_second() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(10).with_urgent());
    for i in 0..40 {
        queue.send_body(&envelope("slow", &format!("backlog-{i}")));
    }
    let running = Arc::new(Running::default());
    let polling = {
        let (store, queue, running) = (store.clone(), queue.clone(), running.clone());
        tokio::spawn(async move { poll_until_drained(&store, &queue, &running).await })
    };
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let sent = tokio::time::Instant::now();
    let urgent = queue.urgent().expect("an urgent queue");
    urgent.send_body(&envelope("slow", "urgent"));
    loop {
        let started = store
            .snapshot()
            .records
            .get("urgent")
            .is_some_and(|r| r.started_at.is_some());
        if started {
            break;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(2),
            "the urgent run waited behind the backlog"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    polling.await.unwrap();
    assert_eq!(store.snapshot().records["urgent"].status, Status::Done);
    assert_eq!(store.snapshot().records["backlog-39"].status, Status::Done);
}

/// Thirty urgent runs and thirty others at once: never more bodies than the concurrency
/// (2) and one receive (2: the concurrency caps a receive) beside it, every run DONE.
#[tokio::test(start_paused = true)]
async fn urgent_runs_never_take_the_worker_past_its_concurrency_and_one_receive() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(10).with_urgent());
    let urgent = queue.urgent().expect("an urgent queue").clone();
    for i in 0..30 {
        queue.send_body(&envelope("slow", &format!("backlog-{i}")));
        urgent.send_body(&envelope("slow", &format!("urgent-{i}")));
    }
    let running = Arc::new(Running::default());
    poll_until_drained(&store, &queue, &running).await;
    let most = running.most.load(Ordering::SeqCst);
    assert!(most <= 4, "{most} bodies at once");
    assert!(
        most > 2,
        "urgent runs took places beside the concurrency: {most}"
    );
    for i in 0..30 {
        for key in [format!("backlog-{i}"), format!("urgent-{i}")] {
            assert_eq!(
                store.snapshot().records.get(&key).map(|r| r.status),
                Some(Status::Done),
                "{key}"
            );
        }
    }
}

/// A queue without an urgent one beside it (a stage deployed before them) is read alone.
#[tokio::test(start_paused = true)]
async fn a_queue_without_an_urgent_one_is_read_alone() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(10));
    for i in 0..5 {
        queue.send_body(&envelope("slow", &format!("run-{i}")));
    }
    let running = Arc::new(Running::default());
    poll_until_drained(&store, &queue, &running).await;
    for i in 0..5 {
        let status = store
            .snapshot()
            .records
            .get(&format!("run-{i}"))
            .map(|r| r.status);
        assert_eq!(status, Some(Status::Done));
    }
    assert!(running.most.load(Ordering::SeqCst) <= 2);
}

/// A memory queue whose urgent receive misbehaves as SQS may: every other call goes to
/// `inner`.
#[derive(Debug, Clone)]
struct Wrapped {
    inner: MemoryQueue,
    asked: Arc<AtomicUsize>,
    urgent: Urgent,
}

#[derive(Debug, Clone, Copy)]
enum Urgent {
    /// The worker may not read it, as IAM answers a worker of a stage deployed before
    /// urgent queues.
    Denied,
    /// It takes what is there at once (hidden for the visibility asked) and answers 2 s
    /// later: a long poll SQS answered while the poller stopped.
    AnswersLate,
}

type Call<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
type Answer<T> = Result<T, QueueError>;

impl JobQueue for Wrapped {
    fn change_visibility<'a>(&'a self, receipt: &'a str, seconds: i32) -> Call<'a, Answer<()>> {
        self.inner.change_visibility(receipt, seconds)
    }
    fn change_visibility_batch<'a>(
        &'a self,
        entries: &'a [(String, i32)],
    ) -> Call<'a, Answer<Vec<String>>> {
        self.inner.change_visibility_batch(entries)
    }
    fn send<'a>(&'a self, message: &'a Outgoing) -> Call<'a, Answer<()>> {
        self.inner.send(message)
    }
    fn delete<'a>(&'a self, receipt: &'a str) -> Call<'a, Answer<()>> {
        self.inner.delete(receipt)
    }
    fn dead_letter<'a>(&'a self, letter: &'a Outgoing) -> Call<'a, Answer<()>> {
        self.inner.dead_letter(letter)
    }
    fn receive<'a>(
        &'a self,
        most: usize,
        wait_seconds: i32,
        hidden_for: Option<i32>,
    ) -> Call<'a, Answer<Vec<Delivery>>> {
        JobQueue::receive(&self.inner, most, wait_seconds, hidden_for)
    }
    fn receive_urgent<'a>(
        &'a self,
        most: usize,
        wait_seconds: i32,
        hidden_for: Option<i32>,
    ) -> Option<Call<'a, Answer<Vec<Delivery>>>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        match self.urgent {
            Urgent::Denied => Some(Box::pin(async {
                Err(QueueError(
                    "AccessDenied: User: arn:aws:sts::1:assumed-role/worker is not authorized to perform: sqs:receivemessage on resource: arn:aws:sqs:eu-west-1:1:schedkit-dev-jobs-urgent".into(),
                ))
            })),
            Urgent::AnswersLate => {
                let taken = self.inner.receive_urgent(most, wait_seconds, hidden_for)?;
                Some(Box::pin(async move {
                    let got = taken.await;
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    got
                }))
            }
        }
    }
    fn delete_batch<'a>(&'a self, receipts: &'a [String]) -> Call<'a, Answer<u64>> {
        self.inner.delete_batch(receipts)
    }
    fn drained<'a>(&'a self) -> Call<'a, Answer<bool>> {
        self.inner.drained()
    }
}

/// An urgent queue the worker may not read is asked once, then left, while the jobs
/// queue's runs go at their pace: one a second for 12 s, each DONE within its second (a
/// worker that rested a second on each refusal asked every second, and read the jobs queue
/// once a second).
#[tokio::test(start_paused = true)]
async fn an_urgent_queue_the_worker_may_not_read_is_asked_once_and_left() {
    let inner = MemoryQueue::new(10);
    let asked = Arc::new(AtomicUsize::new(0));
    let queue = Wrapped {
        inner: inner.clone(),
        asked: asked.clone(),
        urgent: Urgent::Denied,
    };
    let store = MemoryStore::default();
    let runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let processor = Processor::with_queue(
        store.clone(),
        queue,
        super::registry(&runs),
        config(),
        Metrics::capture().0,
    );
    let options = PollOptions {
        wait_seconds: 20,
        ..PollOptions::default()
    };
    let sender = tokio::spawn(async move {
        for i in 0..12 {
            inner.send_body(&envelope("counted", &format!("run-{i}")));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let stop = tokio::time::sleep(Duration::from_secs(13));
    poller::poll(&processor, &options, stop).await;
    sender.await.unwrap();
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "asked again after a refusal"
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 12);
}

/// A poller that stops while SQS answers its urgent receive makes what it brought visible
/// again at once (dropped, the receive left it hidden for the longest lease).
#[tokio::test(start_paused = true)]
async fn a_receive_answered_as_the_poller_stops_leaves_nothing_hidden() {
    let inner = MemoryQueue::new(10).with_urgent();
    let queue = Wrapped {
        inner: inner.clone(),
        asked: Arc::default(),
        urgent: Urgent::AnswersLate,
    };
    let store = MemoryStore::default();
    let runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let processor = Processor::with_queue(
        store,
        queue,
        super::registry(&runs),
        config(),
        Metrics::capture().0,
    );
    let urgent = inner.urgent().unwrap().clone();
    let sender = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        urgent.send_body(&envelope("counted", "late"));
    });
    let options = PollOptions {
        wait_seconds: 1,
        ..PollOptions::default()
    };
    // The urgent receive's long poll takes `late` at 1 s and answers 2 s on, after the
    // poller was told to stop.
    poller::poll(
        &processor,
        &options,
        tokio::time::sleep(Duration::from_secs(2)),
    )
    .await;
    sender.await.unwrap();
    let visible = inner.urgent().unwrap().receive(10, Duration::from_secs(30));
    assert_eq!(visible.len(), 1, "the message came back at once");
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 0);
}
