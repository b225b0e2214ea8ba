//! Pause and resume a job: its schedule's State through the Scheduler API (DISABLED: it
//! fires nothing; ENABLED again on resume), with who, when and why recorded in the job's
//! item ([`crate::store::Pauses`]) so `status` and `jobs` show it and sync keeps the
//! schedule disabled until it is resumed.
//!
//! The record decides; the schedule follows. Each action is one conditional write of the
//! record (a pause never overwrites a pause, a resume removes it with the job's streak of
//! failures), then [`converge`]: the schedule's State is set to what the record says, and
//! the record read again; should it have changed meanwhile (an operator's resume and the
//! worker's automatic pause at once), the schedule is set again. Whatever interleaves,
//! the last one to touch the schedule leaves it as the record says; and whatever stops half
//! way (a crash, a refused call), the next pause, resume or `schedules sync` finishes it,
//! since each of them reads the record.

use aws_sdk_scheduler::Client;
use aws_sdk_scheduler::primitives::DateTime as SmithyTime;
use aws_sdk_scheduler::types::ScheduleState;
use chrono::{DateTime, SecondsFormat, Utc};

use super::TriggerError;
use crate::aws::AwsResultExt;
use crate::schedule::Schedule;
use crate::store::{PauseRecord, PauseStore, Paused, StoreCall};

mod memory;

pub use memory::MemorySchedules;

/// Where a job's schedule is switched on and off: EventBridge Scheduler (its `Client`), or
/// [`MemorySchedules`] where the logic is tested and simulated without it.
pub trait ScheduleSwitch: Send + Sync + std::fmt::Debug {
    /// Sets the State of `job`'s schedule in `group` (nothing is sent when it is `state`
    /// already); [`TriggerError::NoSchedule`] when the group has no such schedule.
    fn set_state<'a>(
        &'a self,
        group: &'a str,
        job: &'a str,
        state: ScheduleState,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<(), TriggerError>>;
}

impl ScheduleSwitch for Client {
    fn set_state<'a>(
        &'a self,
        group: &'a str,
        job: &'a str,
        state: ScheduleState,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<(), TriggerError>> {
        Box::pin(set_state(self, group, job, state, now))
    }
}

/// How often [`converge`] sets the schedule again when the record keeps changing under it
/// before it gives up (and says so: the next action or sync finishes it).
const CONVERGE_ROUNDS: usize = 5;

/// What a pause or resume decided (its record, written), and whether the schedule agrees
/// with it yet: an error there means the record is written and the schedule could not be
/// set (no schedule, a refused call); the next pause, resume or `schedules sync` sets it.
#[derive(Debug)]
pub struct Decided<T> {
    /// What the record says now.
    pub decided: T,
    /// The schedule set to agree with the record, or why it could not be.
    pub schedule: Result<(), TriggerError>,
}

/// Records the pause of `job` (unless it is paused already: that pause is kept, who, when
/// and why) and disables its schedule in `group`. An error: nothing was written that can
/// be told apart from another's (see `written`).
pub async fn pause(
    scheduler: &dyn ScheduleSwitch,
    pauses: &dyn PauseStore,
    group: &str,
    job: &str,
    by: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<Decided<Paused>, TriggerError> {
    let record = PauseRecord {
        job: job.to_string(),
        by: by.to_string(),
        at: now.to_rfc3339_opts(SecondsFormat::Secs, true),
        reason: reason.to_string(),
    };
    let decided = written(pauses, &record, pauses.pause(&record).await).await?;
    let schedule = converge(scheduler, pauses, group, job, now).await.map(drop);
    Ok(Decided { decided, schedule })
}

/// What a pause write did, its answer lost or not: a write whose answer was lost (the
/// store unreachable after it applied it), or was retried and then refused by itself, has
/// made the pause all the same. Either way the record now holds exactly `pause`; read back,
/// that is [`Paused::Now`], so that the schedule follows and the pause is counted.
async fn written(
    pauses: &dyn PauseStore,
    pause: &PauseRecord,
    answer: Result<Paused, crate::store::StoreError>,
) -> Result<Paused, crate::store::StoreError> {
    match answer {
        Ok(Paused::Already(existing)) if existing == *pause => Ok(Paused::Now),
        Ok(decided) => Ok(decided),
        Err(e) => match pauses.pause_of(&pause.job).await {
            Ok(Some(existing)) if existing == *pause => Ok(Paused::Now),
            _ => Err(e),
        },
    }
}

/// The worker's automatic pause of `job` after `streak` consecutive FAILED runs: as
/// [`pause`], but recorded only while the streak still holds (a resume in between forgot
/// it, and wins: [`Paused::StreakEnded`], the schedule left alone).
pub async fn pause_after_streak(
    scheduler: &dyn ScheduleSwitch,
    pauses: &dyn PauseStore,
    group: &str,
    pause: &PauseRecord,
    streak: u32,
    now: DateTime<Utc>,
) -> Result<Decided<Paused>, TriggerError> {
    let answer = pauses.pause_after_streak(pause, streak).await;
    let decided = written(pauses, pause, answer).await?;
    let schedule = match decided {
        Paused::StreakEnded => Ok(()),
        _ => converge(scheduler, pauses, group, &pause.job, now)
            .await
            .map(drop),
    };
    Ok(Decided { decided, schedule })
}

/// Ends `job`'s pause (and forgets its streak of failures) and enables its schedule in
/// `group` again; decides the pause it ended (None when the job was not paused by
/// schedkit, which enables it all the same). An error: the record could not be changed,
/// or (a stage from before the job's own item) the pause ended and the earlier record of it
/// could not be removed; the job's status says which, and the schedule is left as it was.
pub async fn resume(
    scheduler: &dyn ScheduleSwitch,
    pauses: &dyn PauseStore,
    group: &str,
    job: &str,
    now: DateTime<Utc>,
) -> Result<Decided<Option<PauseRecord>>, TriggerError> {
    let decided = pauses.resume(job, now).await?;
    let schedule = converge(scheduler, pauses, group, job, now).await.map(drop);
    Ok(Decided { decided, schedule })
}

/// Sets `job`'s schedule to what its pause record says (DISABLED while paused, ENABLED
/// otherwise), until a read of the record after the change says the same; returns the
/// state it left. A missing schedule is [`TriggerError::NoSchedule`] (the next sync creates
/// it as the record says).
pub async fn converge(
    scheduler: &dyn ScheduleSwitch,
    pauses: &dyn PauseStore,
    group: &str,
    job: &str,
    now: DateTime<Utc>,
) -> Result<ScheduleState, TriggerError> {
    converge_to(scheduler, pauses, group, job, ScheduleState::Enabled, now).await
}

/// [`converge`] for a schedule whose state when not paused is `unpaused` (a sync keeps a
/// job the catalog says `enabled = false` DISABLED).
pub(crate) async fn converge_to(
    scheduler: &dyn ScheduleSwitch,
    pauses: &dyn PauseStore,
    group: &str,
    job: &str,
    unpaused: ScheduleState,
    now: DateTime<Utc>,
) -> Result<ScheduleState, TriggerError> {
    let mut paused = pauses.pause_of(job).await?.is_some();
    for _ in 0..CONVERGE_ROUNDS {
        let state = if paused {
            ScheduleState::Disabled
        } else {
            unpaused.clone()
        };
        scheduler.set_state(group, job, state.clone(), now).await?;
        let again = pauses.pause_of(job).await?.is_some();
        if again == paused {
            return Ok(state);
        }
        paused = again;
    }
    Err(TriggerError::Request(format!(
        "the pause of {job} changed {CONVERGE_ROUNDS} times while its schedule was being set"
    )))
}

/// UpdateSchedule replaces every field: send the schedule as it is but for its State (and
/// its StartDate, sent as the next run on its phase when it has passed, as AWS refuses a
/// start more than five minutes ago). Nothing is sent when the State is already `state`.
async fn set_state(
    scheduler: &Client,
    group: &str,
    job: &str,
    state: ScheduleState,
    now: DateTime<Utc>,
) -> Result<(), TriggerError> {
    let Some(s) = super::stored_schedule(scheduler, group, job).await? else {
        return Err(TriggerError::NoSchedule {
            job: job.to_string(),
            group: group.to_string(),
        });
    };
    let current = s.state.clone().unwrap_or(ScheduleState::Enabled);
    if current == state {
        return Ok(());
    }
    let schedule = Schedule::from_stored(&s).map_err(|e| TriggerError::Request(e.to_string()))?;
    let start = schedule
        .start_to_send(now)
        .map(|t| SmithyTime::from_secs(t.timestamp()));
    scheduler
        .update_schedule()
        .group_name(group)
        .name(job)
        .set_schedule_expression(s.schedule_expression)
        .set_schedule_expression_timezone(s.schedule_expression_timezone)
        .set_start_date(start)
        .set_end_date(s.end_date)
        .set_description(s.description)
        .state(state)
        .set_flexible_time_window(s.flexible_time_window)
        .set_target(s.target)
        .set_action_after_completion(s.action_after_completion)
        .set_kms_key_arn(s.kms_key_arn)
        .send()
        .await
        .aws(format!("updating schedule {group}/{job}"))?;
    Ok(())
}
