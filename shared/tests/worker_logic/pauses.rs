//! `pause_after_failures`: the worker pauses a job's schedule after that many FAILED runs
//! in a row, over the memory store's pause records and schedules kept in memory; a DONE
//! run ends the streak, an operator's resume forgets it, an operator's pause is kept.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_scheduler::types::ScheduleState;
use schedkit::batch::AutoPause;
use schedkit::queue::MemoryQueue;
use schedkit::store::{MemoryStore, PauseRecord, PauseStore};
use schedkit::trigger::pause::{self, MemorySchedules};
use schedkit::{JobContext, JobError, JobPolicy, Metrics, Processor, ProcessorConfig, Registry};
use serde_json::json;

use super::{config, drain, envelope};

/// `nightly` pauses after two FAILED runs in a row; a run whose key starts with `bad`
/// fails for good.
fn worker(store: &MemoryStore, queue: &MemoryQueue, schedules: &MemorySchedules) -> Processor {
    let policy = JobPolicy {
        pause_after_failures: NonZeroU32::new(2),
        ..JobPolicy::default()
    };
    let registry = Registry::new().register("nightly", policy, |ctx: JobContext| async move {
        match ctx.key.starts_with("bad") {
            true => Err(JobError::permanent("the partner is down")),
            false => Ok(json!(null)),
        }
    });
    let config = ProcessorConfig {
        auto_pause: Some(AutoPause::over(
            Arc::new(schedules.clone()),
            Arc::new(store.clone()),
            "stage",
        )),
        ..config()
    };
    Processor::with_queue(
        store.clone(),
        queue.clone(),
        registry,
        config,
        Metrics::capture().0,
    )
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
