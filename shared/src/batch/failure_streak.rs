//! `pause_after_failures = N`: after N consecutive FAILED runs of a job the worker pauses
//! its schedule, as an operator would with `schedkit jobs pause`, and says so (the pause
//! record names `worker` and the failures, an `AutoPaused` metric feeds the job's paused
//! alarm, a `PAUSED` line is logged). The pause is recorded only where there is none (an
//! operator's reason stays) and only while the streak still holds (an operator's resume in
//! between forgot it, and wins).
//!
//! The streak is kept in the executions table ([`ExecutionStore::count_failure`]): a DONE run
//! ends it, `schedkit jobs resume` forgets it. Nothing here changes a run's outcome: the
//! run is FAILED and dead-lettered whether or not the pause succeeds, and a pause that
//! could not be made is tried again by the next failure (the streak is still long enough),
//! or by the redelivery of this one.

use std::num::NonZeroU32;

use chrono::{DateTime, Utc};

use std::sync::Arc;

use crate::aws::SdkConfig;
use crate::store::{AuditEntry, ExecutionStore, PauseRecord, PauseStore, Paused, Pauses};
use crate::telemetry::{Event, Metrics, Transition};
use crate::trigger::pause::ScheduleSwitch;
use crate::trigger::{self, TriggerError};

/// Who an automatic pause is recorded as paused by.
pub const PAUSED_BY_WORKER: &str = "worker";

/// What the worker needs to pause a job's schedule itself: the stage's schedule group (its
/// IAM permission covers that group only) and the pause records.
#[derive(Debug, Clone)]
pub struct AutoPause {
    scheduler: Arc<dyn ScheduleSwitch>,
    pauses: Arc<dyn PauseStore>,
    group: String,
}

impl AutoPause {
    /// Pauses schedules of `group`, recording the pauses in the executions `table`.
    pub fn new(sdk: &SdkConfig, table: &str, group: impl Into<String>) -> Self {
        AutoPause::over(
            Arc::new(aws_sdk_scheduler::Client::new(sdk)),
            Arc::new(Pauses::for_table(sdk, table)),
            group,
        )
    }

    /// Pauses the schedules `scheduler` switches, recording the pauses in `pauses`: the
    /// memory store and [`trigger::pause::MemorySchedules`] in tests and the simulation.
    pub fn over(
        scheduler: Arc<dyn ScheduleSwitch>,
        pauses: Arc<dyn PauseStore>,
        group: impl Into<String>,
    ) -> Self {
        AutoPause {
            scheduler,
            pauses,
            group: group.into(),
        }
    }

    /// The schedule group it pauses in.
    pub fn group(&self) -> &str {
        &self.group
    }
}

/// The processor's side of the streaks: counts, and pauses when one is long enough.
#[derive(Clone)]
pub(super) struct FailureStreaks {
    pub(super) store: std::sync::Arc<dyn ExecutionStore>,
    pub(super) auto_pause: Option<AutoPause>,
    pub(super) metrics: Metrics,
}

impl FailureStreaks {
    /// A run of the job ended FAILED (or its FAILED outcome was met again on redelivery).
    pub(super) async fn failed(
        &self,
        limit: NonZeroU32,
        t: &Transition<'_>,
        error: &str,
        now: DateTime<Utc>,
    ) {
        let streak = match self
            .store
            .count_failure(t.job, t.key, error, limit.get(), now)
            .await
        {
            Ok(n) => n,
            Err(e) => {
                let error = e.to_string();
                self.emit(t, Event::StreakNotCounted { error: &error });
                return;
            }
        };
        if streak < limit.get() {
            return;
        }
        let Some(auto) = &self.auto_pause else {
            let error = format!(
                "{streak} consecutive runs FAILED, and this worker has no schedule group to pause the job in (set SCHEDKIT_SCHEDULE_GROUP)"
            );
            self.emit(t, Event::PauseNotMade { error: &error });
            return;
        };
        let reason = format!(
            "{streak} consecutive runs FAILED (pause_after_failures = {limit}); the last, `{}`: {error}",
            t.key
        );
        let pause = PauseRecord {
            job: t.job.to_string(),
            by: PAUSED_BY_WORKER.to_string(),
            at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            reason: reason.clone(),
        };
        let made = trigger::pause::pause_after_streak(
            auto.scheduler.as_ref(),
            auto.pauses.as_ref(),
            &auto.group,
            &pause,
            limit.get(),
            now,
        )
        .await;
        let decided = match made {
            Ok(d) => d,
            // Not recorded, or not known to be (its answer lost, and the record could not
            // be read back): the next failure (the streak is still long enough), or the
            // redelivery of this one, tries again.
            Err(e) => {
                let error = e.to_string();
                self.emit(t, Event::PauseNotMade { error: &error });
                return;
            }
        };
        match decided.schedule {
            Ok(()) => {}
            // Recorded paused: the next sync creates the schedule DISABLED.
            Err(TriggerError::NoSchedule { .. }) => {}
            Err(e) => {
                let error = format!("{e} (the pause is recorded: the next sync disables it)");
                self.emit(t, Event::ScheduleNotDisabled { error: &error });
            }
        }
        // Paused already (by an operator, or by an earlier failure: who and why kept), or
        // resumed since this streak was counted: no pause of this failure's. The worker's
        // own earlier pause is audited again (once: the entry's id is the pause's), as its
        // entry may have failed after the pause was made.
        let audited = match decided.decided {
            Paused::Now => {
                self.emit(t, Event::AutoPaused { reason: &reason });
                pause
            }
            Paused::Already(earlier) if earlier.by == PAUSED_BY_WORKER => earlier,
            Paused::Already(_) | Paused::StreakEnded => return,
        };
        self.audit_pause(t, &auto.group, &audited, now).await;
    }

    /// The automatic pause, in the stage's audit trail beside the operators' actions: one
    /// entry per pause (its id the job's and the pause's time). The pause stands whatever
    /// becomes of the entry: a failure to write it is logged, and the job's next failure
    /// writes it. `now` (the worker's clock) stands in for a pause time that does not parse.
    async fn audit_pause(
        &self,
        t: &Transition<'_>,
        group: &str,
        pause: &PauseRecord,
        now: DateTime<Utc>,
    ) {
        let when = DateTime::parse_from_rfc3339(&pause.at).map_or(now, |at| at.with_timezone(&Utc));
        let entry = AuditEntry {
            id: format!("auto-pause/{}/{}", pause.job, pause.at),
            when: crate::store::timestamp(when),
            who: PAUSED_BY_WORKER.to_string(),
            what: "auto-pause".into(),
            details: serde_json::json!({
                "job": t.job,
                "schedule_group": group,
                "reason": pause.reason,
            }),
            phase: "end".into(),
            finished: Some(true),
            result: Some(serde_json::json!({"paused": t.job})),
            error: None,
            done: None,
        };
        if let Err(e) = self.store.audit(&entry).await {
            tracing::warn!(job = t.job, error = %e, "the automatic pause is not in the audit trail");
        }
    }

    /// A run of the job ended DONE: its streak, if any, is over.
    pub(super) async fn succeeded(&self, t: &Transition<'_>) {
        if let Err(e) = self.store.clear_failures(t.job).await {
            let error = e.to_string();
            self.emit(t, Event::StreakNotCleared { error: &error });
        }
    }

    fn emit(&self, t: &Transition<'_>, event: Event<'_>) {
        event.record(t, &self.metrics);
    }
}
