//! Pauses in the simulated world: `broken` and `flaky` pause their schedule after two
//! FAILED runs in a row (the worker's automatic pause, over the memory store's pause
//! records and schedules kept in memory), and an operator pauses and resumes jobs at random
//! (`schedkit jobs pause/resume`) while the workers run. At the end, the sync every deploy
//! runs sets each schedule as its record says; then the invariants read the records.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::sync::Arc;

use aws_sdk_scheduler::types::ScheduleState;
use schedkit::batch::AutoPause;
use schedkit::store::{MemoryStore, Paused};
use schedkit::trigger::pause::{self, MemorySchedules};

use super::world::{BROKEN, FLAKY, QUEUED};

/// The schedule group of the simulated stage.
pub const GROUP: &str = "sim";
/// Who the operator's pauses are recorded as paused by.
pub const OPERATOR: &str = "operator";
/// The jobs whose worker pauses them after [`STREAK`] FAILED runs.
pub const PAUSED_AFTER_FAILURES: [&str; 2] = [BROKEN, FLAKY];
/// `pause_after_failures` of those jobs.
pub const STREAK: u32 = 2;

/// `pause_after_failures` of `job`, as the registry gives it.
pub fn pause_after_failures(job: &str) -> Option<NonZeroU32> {
    PAUSED_AFTER_FAILURES
        .contains(&job)
        .then(|| NonZeroU32::new(STREAK).expect("not zero"))
}

/// The stage's schedules: one per job but `queued`, which was never synced (a pause of it
/// is recorded, and its schedule is created DISABLED by the next sync).
pub fn schedules(jobs: &[&str]) -> MemorySchedules {
    MemorySchedules::enabled(jobs.iter().copied().filter(|j| *j != QUEUED))
}

/// What each worker pauses with.
pub fn auto_pause(schedules: &MemorySchedules, store: &MemoryStore) -> AutoPause {
    AutoPause::over(Arc::new(schedules.clone()), Arc::new(store.clone()), GROUP)
}

/// One thing the operator did, and what it answered.
#[derive(Debug, Clone)]
pub struct Act {
    pub job: &'static str,
    pub resume: bool,
    /// What the pause record says it did; None when the call failed (written or not).
    pub decided: Option<Decided>,
}

/// The record's part of an operator's act.
#[derive(Debug, Clone, PartialEq)]
pub enum Decided {
    Paused(Paused),
    Resumed,
}

/// The operator pauses or resumes `job` (through the faulty store, as the console would).
pub async fn operator_acts(
    schedules: &MemorySchedules,
    store: &MemoryStore,
    job: &'static str,
    resume: bool,
    now: chrono::DateTime<chrono::Utc>,
) -> Act {
    let decided = if resume {
        pause::resume(schedules, store, GROUP, job, now)
            .await
            .ok()
            .map(|_| Decided::Resumed)
    } else {
        pause::pause(schedules, store, GROUP, job, OPERATOR, "by hand", now)
            .await
            .ok()
            .map(|d| Decided::Paused(d.decided))
    };
    Act {
        job,
        resume,
        decided,
    }
}

/// The sync after the world: each job's schedule set as its record says (no faults now, in
/// the store or the Scheduler),
/// and the state it was left in; an error when it could not be (a job without a schedule
/// says so).
pub async fn final_sync(
    schedules: &MemorySchedules,
    store: &MemoryStore,
    jobs: &[&'static str],
    now: chrono::DateTime<chrono::Utc>,
) -> BTreeMap<&'static str, Result<ScheduleState, String>> {
    let store = store.without_faults();
    let schedules = schedules.without_faults();
    let mut out = BTreeMap::new();
    for &job in jobs {
        let left = pause::converge(&schedules, &store, GROUP, job, now)
            .await
            .map_err(|e| e.to_string());
        out.insert(job, left);
    }
    out
}

/// What the pause invariants read.
#[derive(Debug, Default)]
pub struct PauseReport {
    /// The operator's acts, in order.
    pub acts: Vec<Act>,
    /// Each job's schedule after the final sync.
    pub synced: BTreeMap<&'static str, Result<ScheduleState, String>>,
    /// Each schedule's State as the memory scheduler holds it after the sync.
    pub states: BTreeMap<&'static str, Option<ScheduleState>>,
}

/// The pause invariants over the final records.
pub fn check(
    report: &PauseReport,
    records: &BTreeMap<String, schedkit::store::PauseRecord>,
    broken: &mut Vec<String>,
) {
    for (job, synced) in &report.synced {
        let paused = records.contains_key(*job);
        match synced {
            Ok(state) => {
                let wanted = if paused {
                    ScheduleState::Disabled
                } else {
                    ScheduleState::Enabled
                };
                if *state != wanted || report.states[job].as_ref() != Some(&wanted) {
                    broken.push(format!(
                        "the schedule of {job} was left {state:?} (holds {:?}) while its record says paused: {paused}",
                        report.states[job]
                    ));
                }
            }
            Err(e) if *job == QUEUED && e.contains("no schedule") => {}
            Err(e) if *job == QUEUED => {
                broken.push(format!("{job} has no schedule, and the sync said: {e}"));
            }
            Err(e) => broken.push(format!("the sync could not set {job}'s schedule: {e}")),
        }
    }
    for (job, record) in records {
        if record.by != OPERATOR && pause_after_failures(job).is_none() {
            broken.push(format!(
                "{job} was paused by {} though it has no pause_after_failures",
                record.by
            ));
        }
    }
    // An operator's pause, once recorded, is the job's pause until a resume: the worker
    // never writes over it.
    let mut last: BTreeMap<&str, &Act> = BTreeMap::new();
    for act in &report.acts {
        last.insert(act.job, act);
    }
    for (job, act) in last {
        if !act.resume
            && act.decided == Some(Decided::Paused(Paused::Now))
            && records.get(job).map(|r| r.by.as_str()) != Some(OPERATOR)
        {
            broken.push(format!(
                "the operator paused {job} last, and its record says {:?}",
                records.get(job)
            ));
        }
    }
}
