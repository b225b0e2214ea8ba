//! Schedules' States kept in memory, for the worker's automatic pause tested and simulated
//! without EventBridge Scheduler: what matters there is the State each job's schedule is
//! left in, that a job with no schedule says so as the Scheduler API does, and that a call
//! can fail as a call to a service can (the simulation draws it from its seed, through the
//! memory store's [`Faults`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use aws_sdk_scheduler::types::ScheduleState;
use chrono::{DateTime, Utc};

use super::ScheduleSwitch;
use crate::aws::AwsError;
use crate::store::{Fault, Faults, NoFaults, StoreCall};
use crate::trigger::TriggerError;

/// The schedules of one group, by job. Cheap to clone: clones share them.
#[derive(Debug, Clone)]
pub struct MemorySchedules {
    states: Arc<Mutex<BTreeMap<String, ScheduleState>>>,
    /// What happens to each call (`set_schedule` on the job).
    faults: Arc<dyn Faults>,
}

impl Default for MemorySchedules {
    fn default() -> Self {
        MemorySchedules {
            states: Arc::default(),
            faults: Arc::new(NoFaults),
        }
    }
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
            faults: Arc::new(NoFaults),
        }
    }

    /// The same schedules, each call first asking `faults` what happens to it: refused
    /// (nothing changed), or applied with its answer lost (the caller told it failed).
    pub fn with_faults(&self, faults: Arc<dyn Faults>) -> Self {
        MemorySchedules {
            states: self.states.clone(),
            faults,
        }
    }

    /// The same schedules, every call answered (the sync after a simulated run).
    pub fn without_faults(&self) -> Self {
        self.with_faults(Arc::new(NoFaults))
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
            let (delay, fault) = self.faults.request("set_schedule", job);
            // A call to a service: whatever else is ready runs first.
            tokio::time::sleep(delay).await;
            tokio::task::yield_now().await;
            let unavailable = |answer: &str| {
                TriggerError::Aws(AwsError {
                    doing: format!("setting the schedule of {job} to {state:?}"),
                    answer: answer.to_string(),
                    code: None,
                })
            };
            if fault == Fault::Unavailable {
                return Err(unavailable("refused (fault)"));
            }
            let set = match self.lock().get_mut(job) {
                Some(current) => {
                    *current = state.clone();
                    Ok(())
                }
                None => Err(TriggerError::NoSchedule {
                    job: job.to_string(),
                    group: group.to_string(),
                }),
            };
            match fault {
                Fault::LoseAnswer if set.is_ok() => Err(unavailable("answer lost (fault)")),
                _ => set,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Every call meets the same fault.
    #[derive(Debug)]
    struct Always(Fault);

    impl Faults for Always {
        fn request(&self, _: &'static str, _: &str) -> (Duration, Fault) {
            (Duration::ZERO, self.0)
        }
    }

    async fn disable(schedules: &MemorySchedules) -> Result<(), TriggerError> {
        let now = "2026-12-02T00:00:00Z".parse().unwrap();
        schedules
            .set_state("g", "nightly", ScheduleState::Disabled, now)
            .await
    }

    #[tokio::test]
    async fn a_refused_call_changes_nothing_and_a_lost_answer_is_applied_all_the_same() {
        let schedules = MemorySchedules::enabled(["nightly"]);
        let refused = schedules.with_faults(Arc::new(Always(Fault::Unavailable)));
        assert!(matches!(disable(&refused).await, Err(TriggerError::Aws(_))));
        assert_eq!(schedules.state("nightly"), Some(ScheduleState::Enabled));

        let lost = schedules.with_faults(Arc::new(Always(Fault::LoseAnswer)));
        assert!(matches!(disable(&lost).await, Err(TriggerError::Aws(_))));
        assert_eq!(schedules.state("nightly"), Some(ScheduleState::Disabled));

        let answered = lost.without_faults();
        assert!(disable(&answered).await.is_ok());
        let missing = MemorySchedules::default().with_faults(Arc::new(Always(Fault::LoseAnswer)));
        assert!(matches!(
            disable(&missing).await,
            Err(TriggerError::NoSchedule { .. })
        ));
    }
}
