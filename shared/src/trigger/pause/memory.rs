//! Schedules' States kept in memory, for the worker's automatic pause tested and simulated
//! without EventBridge Scheduler: what matters there is the State each job's schedule is
//! left in, and that a job with no schedule says so as the Scheduler API does.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use aws_sdk_scheduler::types::ScheduleState;
use chrono::{DateTime, Utc};

use super::ScheduleSwitch;
use crate::store::StoreCall;
use crate::trigger::TriggerError;

/// The schedules of one group, by job. Cheap to clone: clones share them.
#[derive(Debug, Clone, Default)]
pub struct MemorySchedules {
    states: Arc<Mutex<BTreeMap<String, ScheduleState>>>,
}

impl MemorySchedules {
    /// Schedules for `jobs`, each ENABLED (as a sync leaves them).
    pub fn enabled<'a>(jobs: impl IntoIterator<Item = &'a str>) -> Self {
        let states = jobs
            .into_iter()
            .map(|j| (j.to_string(), ScheduleState::Enabled))
            .collect();
        MemorySchedules {
            states: Arc::new(Mutex::new(states)),
        }
    }

    /// The State of `job`'s schedule; None when it has none.
    pub fn state(&self, job: &str) -> Option<ScheduleState> {
        self.lock().get(job).cloned()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, ScheduleState>> {
        self.states.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ScheduleSwitch for MemorySchedules {
    fn set_state<'a>(
        &'a self,
        group: &'a str,
        job: &'a str,
        state: ScheduleState,
        _now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<(), TriggerError>> {
        Box::pin(async move {
            // A call to a service: whatever else is ready runs first.
            tokio::task::yield_now().await;
            match self.lock().get_mut(job) {
                Some(current) => {
                    *current = state;
                    Ok(())
                }
                None => Err(TriggerError::NoSchedule {
                    job: job.to_string(),
                    group: group.to_string(),
                }),
            }
        })
    }
}
