//! `pause_after_failures`: the worker pauses a job's schedule after that many FAILED runs
//! in a row, over the memory store's pause records and schedules kept in memory; a DONE
//! run ends the streak, an operator's resume forgets it, an operator's pause is kept.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_scheduler::types::ScheduleState;
use schedkit::batch::AutoPause;
use schedkit::queue::MemoryQueue;
use schedkit::store::{Fault, Faults, MemoryStore, PauseRecord, PauseStore};
use schedkit::trigger::pause::{self, MemorySchedules};
use schedkit::{Clock, Ctx, JobError, JobPolicy, Jobs, Metrics, Processor, ProcessorConfig};
use serde_json::json;

use super::{VISIBILITY, config, drain, envelope, metric_total};

/// `nightly` pauses after two FAILED runs in a row; a run whose key starts with `bad`
/// fails for good.
fn worker(store: &MemoryStore, queue: &MemoryQueue, schedules: &MemorySchedules) -> Processor {
    worker_counted(store, queue, schedules, Metrics::capture().0)
}

/// [`worker`], its metrics written to `metrics`.
fn worker_counted(
    store: &MemoryStore,
    queue: &MemoryQueue,
    schedules: &MemorySchedules,
    metrics: Metrics,
) -> Processor {
    let policy = JobPolicy {
        pause_after_failures: NonZeroU32::new(2),
        ..JobPolicy::default()
    };
    let registry = Jobs::new()
        .add("nightly", |ctx: Ctx| async move {
            match ctx.key.starts_with("bad") {
                true => Err(JobError::permanent("the partner is down")),
                false => Ok(json!(null)),
            }
        })
        .bind_policies(|_| policy.clone());
    let config = ProcessorConfig {
        auto_pause: Some(AutoPause::over(
            Arc::new(schedules.clone()),
            Arc::new(store.clone()),
            "stage",
        )),
        ..config()
    };
    Processor::with_queue(store.clone(), queue.clone(), registry, config, metrics)
}

async fn run(processor: &Processor, queue: &MemoryQueue, key: &str) -> Vec<String> {
    queue.send_body(&envelope("nightly", key));
    drain(processor, queue, Duration::from_secs(5)).await
}

async fn pause_of(store: &MemoryStore) -> Option<PauseRecord> {
    store.pause_of("nightly").await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn two_failed_runs_in_a_row_pause_the_schedule_and_a_done_run_between_ends_the_streak() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(10));
    let schedules = MemorySchedules::enabled(["nightly"]);
    let worker = worker(&store, &queue, &schedules);
    assert_eq!(run(&worker, &queue, "bad-1").await, ["dead-lettered"]);
    assert_eq!(run(&worker, &queue, "good-1").await, ["succeeded"]);
    run(&worker, &queue, "bad-2").await;
    assert_eq!(
        pause_of(&store).await,
        None,
        "the DONE run ended the streak"
    );
    assert_eq!(schedules.state("nightly"), Some(ScheduleState::Enabled));

    run(&worker, &queue, "bad-3").await;
    let paused = pause_of(&store)
        .await
        .expect("paused after bad-2 and bad-3");
    assert_eq!(paused.by, "worker");
    assert!(
        paused.reason.starts_with("2 consecutive runs FAILED") && paused.reason.contains("bad-3"),
        "{}",
        paused.reason
    );
    assert_eq!(schedules.state("nightly"), Some(ScheduleState::Disabled));
    // In the stage's audit trail, beside the operators' actions.
    let trail = store.snapshot().audit;
    assert_eq!(trail.len(), 1, "{trail:#?}");
    assert_eq!(
        (trail[0].what.as_str(), trail[0].who.as_str()),
        ("auto-pause", "worker")
    );
    assert_eq!(trail[0].details["job"], "nightly");
    assert_eq!(trail[0].finished, Some(true));

    // The operator resumes: the streak is forgotten, one more failure pauses nothing.
    pause::resume(&schedules, &store, "stage", "nightly", chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(schedules.state("nightly"), Some(ScheduleState::Enabled));
    run(&worker, &queue, "bad-4").await;
    assert_eq!(pause_of(&store).await, None);
    assert_eq!(schedules.state("nightly"), Some(ScheduleState::Enabled));
}

#[tokio::test(start_paused = true)]
async fn an_operators_pause_is_kept_through_a_streak_and_a_missing_schedule_keeps_the_record() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(10));
    // Never synced: no schedule to disable, the pause is recorded all the same.
    let schedules = MemorySchedules::enabled([]);
    let worker = worker(&store, &queue, &schedules);
    let decided = pause::pause(
        &schedules,
        &store,
        "stage",
        "nightly",
        "ops",
        "migrating",
        chrono::Utc::now(),
    )
    .await
    .unwrap();
    assert!(decided.schedule.is_err(), "no schedule to disable");
    run(&worker, &queue, "bad-1").await;
    run(&worker, &queue, "bad-2").await;
    let kept = pause_of(&store).await.unwrap();
    assert_eq!(
        (kept.by.as_str(), kept.reason.as_str()),
        ("ops", "migrating")
    );
}

/// The store loses the answer of every pause it writes (and of nothing else).
#[derive(Debug)]
struct PauseAnswersLost;

impl Faults for PauseAnswersLost {
    fn request(&self, request: &'static str, _: &str) -> (Duration, Fault) {
        match request {
            "pause" => (Duration::ZERO, Fault::LoseAnswer),
            _ => (Duration::ZERO, Fault::None),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_pause_whose_answer_was_lost_still_disables_the_schedule_and_is_counted() {
    let store = MemoryStore::new(Arc::new(PauseAnswersLost));
    let queue = MemoryQueue::new(10);
    let schedules = MemorySchedules::enabled(["nightly"]);
    let (metrics, lines) = Metrics::capture();
    let worker = worker_counted(&store, &queue, &schedules, metrics);
    run(&worker, &queue, "bad-1").await;
    run(&worker, &queue, "bad-2").await;
    let paused = pause_of(&store).await.expect("the pause was written");
    assert_eq!(paused.by, "worker");
    assert_eq!(
        schedules.state("nightly"),
        Some(ScheduleState::Disabled),
        "the record says paused: the schedule follows"
    );
    assert_eq!(
        metric_total(&lines, "AutoPaused"),
        1.0,
        "the pause is counted, for the job's paused alarm"
    );
}

/// The store refuses the first audit entry it is asked to write (and nothing else).
#[derive(Debug, Default)]
struct FirstAuditRefused(std::sync::atomic::AtomicBool);

impl Faults for FirstAuditRefused {
    fn request(&self, request: &'static str, _: &str) -> (Duration, Fault) {
        let refused = request == "audit" && !self.0.swap(true, std::sync::atomic::Ordering::SeqCst);
        match refused {
            true => (Duration::ZERO, Fault::Unavailable),
            false => (Duration::ZERO, Fault::None),
        }
    }
}

/// The review's hole: the pause is made before its audit entry, so an entry that could not
/// be written was never written (the next failure found the job paused already). Now the
/// worker's own pause, found unaudited, gets its entry, once, whenever a later failure of
/// the job comes by.
#[tokio::test(start_paused = true)]
async fn an_automatic_pause_whose_audit_entry_failed_gets_it_at_the_next_failure_once() {
    let store = MemoryStore::new(Arc::new(FirstAuditRefused::default()));
    let queue = MemoryQueue::new(10);
    let schedules = MemorySchedules::enabled(["nightly"]);
    let worker = worker(&store, &queue, &schedules);
    run(&worker, &queue, "bad-1").await;
    run(&worker, &queue, "bad-2").await;
    let paused = pause_of(&store).await.expect("paused");
    assert!(store.snapshot().audit.is_empty(), "the entry was refused");
    run(&worker, &queue, "bad-3").await;
    run(&worker, &queue, "bad-4").await;
    let trail = store.snapshot().audit;
    assert_eq!(trail.len(), 1, "{trail:#?}");
    assert_eq!(trail[0].what, "auto-pause");
    assert_eq!(trail[0].details["reason"], paused.reason.as_str());
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(&trail[0].when).unwrap(),
        chrono::DateTime::parse_from_rfc3339(&paused.at).unwrap(),
        "the entry says when the pause was made"
    );
}

#[tokio::test(start_paused = true)]
async fn failed_runs_delivered_again_after_a_resume_do_not_pause_the_job_again() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(10));
    let schedules = MemorySchedules::enabled(["nightly"]);
    let clock = Clock::following_tokio("2026-12-02T09:00:00Z".parse().unwrap());
    let worker = worker(&store, &queue, &schedules);
    // Two runs fail and pause the job, and their messages are never acknowledged (the
    // worker stopped before it deleted them).
    queue.send_body(&envelope("nightly", "bad-1"));
    queue.send_body(&envelope("nightly", "bad-2"));
    let first = queue.receive(10, VISIBILITY);
    assert_eq!(first.len(), 2);
    worker.process(first, None).await;
    assert_eq!(pause_of(&store).await.map(|p| p.by), Some("worker".into()));
    // The operator fixes the cause and resumes; then the two old messages come back.
    tokio::time::sleep(Duration::from_secs(5)).await;
    pause::resume(&schedules, &store, "stage", "nightly", clock.now())
        .await
        .unwrap();
    let labels = drain(&worker, &queue, VISIBILITY + Duration::from_secs(5)).await;
    assert_eq!(labels.len(), 2, "both delivered again: {labels:?}");
    assert_eq!(
        pause_of(&store).await,
        None,
        "no run failed since the resume: the job stays resumed"
    );
    assert_eq!(schedules.state("nightly"), Some(ScheduleState::Enabled));
}
