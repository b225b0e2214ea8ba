//! Pause and resume a job: its schedule's State through the Scheduler API (DISABLED: it
//! fires nothing; ENABLED again on resume), with who, when and why recorded beside the
//! job's records ([`crate::store::Pauses`]) so `status` and `jobs` show it and sync keeps
//! the schedule disabled until it is resumed.

use aws_sdk_scheduler::Client;
use aws_sdk_scheduler::primitives::DateTime as SmithyTime;
use aws_sdk_scheduler::types::ScheduleState;
use chrono::{DateTime, SecondsFormat, Utc};

use super::TriggerError;
use crate::aws::AwsResultExt;
use crate::schedule::Schedule;
use crate::store::{PauseRecord, Pauses};

/// Disables `job`'s schedule in `group` and records the pause.
pub async fn pause(
    scheduler: &Client,
    pauses: &Pauses,
    group: &str,
    job: &str,
    by: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<PauseRecord, TriggerError> {
    let record = PauseRecord {
        job: job.to_string(),
        by: by.to_string(),
        at: now.to_rfc3339_opts(SecondsFormat::Secs, true),
        reason: reason.to_string(),
    };
    // The record first: a sync that runs in between keeps the schedule disabled.
    pauses.put(&record).await.map_err(store)?;
    set_state(scheduler, group, job, ScheduleState::Disabled, now).await?;
    Ok(record)
}

/// Enables `job`'s schedule in `group` again and forgets its pause; returns the pause it
/// ended (None when the job was not paused by schedkit, which enables it all the same).
pub async fn resume(
    scheduler: &Client,
    pauses: &Pauses,
    group: &str,
    job: &str,
    now: DateTime<Utc>,
) -> Result<Option<PauseRecord>, TriggerError> {
    set_state(scheduler, group, job, ScheduleState::Enabled, now).await?;
    pauses.remove(job).await.map_err(store)
}

fn store(e: crate::store::StoreError) -> TriggerError {
    TriggerError::Request(e.to_string())
}

/// UpdateSchedule replaces every field: send the schedule as it is but for its State (and
/// its StartDate, sent as the next run on its phase when it has passed, as AWS refuses a
/// start more than five minutes ago).
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
