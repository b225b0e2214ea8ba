//! Runs once, retries after its backoff, dead-letters poison, survives a lost answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use schedkit::Status;
use schedkit::queue::MemoryQueue;
use schedkit::store::{Fault, Faults, MemoryStore};

use super::{drain, envelope, processor};

#[tokio::test(start_paused = true)]
async fn a_run_and_its_duplicate_run_the_job_once() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(10));
    let runs = Arc::new(AtomicU32::new(0));
    let processor = processor(&store, &queue, &runs);
    queue.send_body(&envelope("counted", "k1"));
    queue.send_body(&envelope("counted", "k1"));
    let labels = drain(&processor, &queue, Duration::from_secs(5)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // In one batch, the copy meets its run in progress, is hidden, comes back after it,
    // and is answered as its duplicate.
    assert_eq!(labels, ["succeeded", "in-progress", "duplicate"]);
    assert_eq!(store.snapshot().records["k1"].status, Status::Done);
    assert!(queue.lock().messages.is_empty(), "both acknowledged");
}

#[tokio::test(start_paused = true)]
async fn a_retryable_failure_comes_back_after_its_backoff_and_succeeds() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(10));
    let runs = Arc::new(AtomicU32::new(0));
    let processor = processor(&store, &queue, &runs);
    queue.send_body(&envelope("flaky", "f1"));
    let started = tokio::time::Instant::now();
    let labels = drain(&processor, &queue, Duration::from_secs(60)).await;
    assert_eq!(labels, ["retrying", "succeeded"]);
    let record = &store.snapshot().records["f1"];
    assert_eq!((record.status, record.attempt), (Status::Done, 2));
    // The first retry's nominal delay is 5 s (jittered): it waited, simulated.
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_message_that_is_no_envelope_goes_to_the_dlq_with_its_reason() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(10));
    let runs = Arc::new(AtomicU32::new(0));
    let processor = processor(&store, &queue, &runs);
    queue.send_body("not an envelope");
    let labels = drain(&processor, &queue, Duration::from_secs(5)).await;
    assert_eq!(labels, ["dead-lettered"]);
    let state = queue.lock();
    assert_eq!(state.dead_letters.len(), 1);
    let reason = &state.dead_letters[0].attributes[schedkit::dead_letter::attr::REASON];
    assert_eq!(reason.string.as_deref(), Some("poison"));
}

/// Loses the answer of the first finish: the write is applied, the worker told the store
/// was unavailable.
#[derive(Debug, Default)]
struct LoseFirstFinish(AtomicU32);

impl Faults for LoseFirstFinish {
    fn request(&self, request: &'static str, _: &str) -> (Duration, Fault) {
        let first = request == "finish" && self.0.fetch_add(1, Ordering::SeqCst) == 0;
        let fault = if first {
            Fault::LoseAnswer
        } else {
            Fault::None
        };
        (Duration::from_millis(5), fault)
    }
}

#[tokio::test(start_paused = true)]
async fn a_finish_whose_answer_was_lost_leaves_the_message_and_its_redelivery_is_a_duplicate() {
    let store = MemoryStore::new(Arc::new(LoseFirstFinish::default()));
    let queue = MemoryQueue::new(10);
    let runs = Arc::new(AtomicU32::new(0));
    let processor = processor(&store, &queue, &runs);
    queue.send_body(&envelope("counted", "k1"));
    let labels = drain(&processor, &queue, Duration::from_secs(60)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "ran once");
    assert_eq!(labels, ["unavailable", "duplicate"]);
    assert_eq!(store.snapshot().records["k1"].status, Status::Done);
}
