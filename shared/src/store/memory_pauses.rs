//! The memory store's pause records and failure streaks: the decisions of
//! [`super::Pauses`]' and the failure count's conditional writes (a pause never overwrites
//! a pause; an automatic one only while its streak holds; a failure counted only after the
//! last resume and below the cap), each made by evaluating the very condition DynamoDB is
//! sent ([`pause_condition`], [`count_condition`]) over the job's item as DynamoDB holds it
//! ([`job_item`]); each one request that meets the store's faults.

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

use super::attributes::{Item, n, s};
use super::failures::count_condition;
use super::memory::{MemoryState, MemoryStore};
use super::pauses::{
    PauseRecord, PauseStore, Paused, RESUME_TRIES, pause_condition, resume_condition, resumed_by,
    windows_after_resume,
};
use super::{KEY_ATTRIBUTE, StoreCall, StoreError, job_key};

/// The job's item ([`job_key`]) as DynamoDB holds it, with the attributes its writes'
/// conditions read: the pause (`by`, `at`, `reason`), the failed runs counted
/// (`failed_keys`, a string set, absent when empty as DynamoDB has no empty set) and the
/// last resume (`resumed_at`, epoch ms).
pub(super) fn job_item(state: &MemoryState, job: &str) -> Item {
    let mut item = Item::from([(KEY_ATTRIBUTE.to_string(), s(&job_key(job)))]);
    if let Some(p) = state.pauses.get(job) {
        item.insert("by".into(), s(&p.by));
        item.insert("at".into(), s(&p.at));
        item.insert("reason".into(), s(&p.reason));
    }
    if let Some(keys) = state.streaks.get(job).filter(|k| !k.is_empty()) {
        item.insert(
            "failed_keys".into(),
            AttributeValue::Ss(keys.iter().cloned().collect()),
        );
    }
    if let Some(ms) = state.resumed_at_ms.get(job) {
        item.insert("resumed_at".into(), n(*ms));
    }
    item
}

impl MemoryStore {
    async fn write_pause(
        &self,
        pause: &PauseRecord,
        streak: Option<u32>,
    ) -> Result<Paused, StoreError> {
        self.request("pause", &pause.job, |state| {
            if !pause_condition(streak).holds(Some(&job_item(state, &pause.job))) {
                // As DynamoDB's refusal returns the item: its pause, or none (the streak).
                return match state.pauses.get(&pause.job) {
                    Some(existing) => Paused::Already(existing.clone()),
                    None => Paused::StreakEnded,
                };
            }
            state.pauses.insert(pause.job.clone(), pause.clone());
            Paused::Now
        })
        .await
    }

    /// Counts the run `key` of `job` FAILED at `failed_at` into the job's streak (capped
    /// at `cap`), as [`super::DynamoStore::count_failure`]: the streak's length after.
    pub(super) async fn count_failure(
        &self,
        job: &str,
        key: &str,
        cap: u32,
        failed_at: DateTime<Utc>,
    ) -> Result<u32, StoreError> {
        self.request("count_failure", job, |state| {
            let counts = count_condition(key, cap, failed_at).holds(Some(&job_item(state, job)));
            let keys = state.streaks.entry(job.to_string()).or_default();
            if counts {
                keys.insert(key.to_string());
            }
            keys.len() as u32
        })
        .await
    }
}

impl PauseStore for MemoryStore {
    fn pause_of<'a>(
        &'a self,
        job: &'a str,
    ) -> StoreCall<'a, Result<Option<PauseRecord>, StoreError>> {
        Box::pin(self.request("pause_of", job, |state| state.pauses.get(job).cloned()))
    }

    fn pause<'a>(&'a self, pause: &'a PauseRecord) -> StoreCall<'a, Result<Paused, StoreError>> {
        Box::pin(self.write_pause(pause, None))
    }

    fn pause_after_streak<'a>(
        &'a self,
        pause: &'a PauseRecord,
        streak: u32,
    ) -> StoreCall<'a, Result<Paused, StoreError>> {
        Box::pin(self.write_pause(pause, Some(streak)))
    }

    fn resume<'a>(
        &'a self,
        job: &'a str,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<Option<PauseRecord>, StoreError>> {
        // As DynamoDB's resume: a read of the job's item, then a write on the condition
        // that it still holds the pause read ([`resume_condition`]), again on a refusal.
        Box::pin(async move {
            let mut refused: Option<PauseRecord> = None;
            for _ in 0..RESUME_TRIES {
                let (item, pause) = self
                    .request("resume.read", job, |state| {
                        (job_item(state, job), state.pauses.get(job).cloned())
                    })
                    .await?;
                if refused.is_some() && resumed_by(&item, now) {
                    return Ok(refused);
                }
                let condition = resume_condition(pause.as_ref());
                let passed = self
                    .request("resume", job, |state| {
                        if !condition.holds(Some(&job_item(state, job))) {
                            return false;
                        }
                        state.streaks.remove(job);
                        state
                            .resumed_at_ms
                            .insert(job.to_string(), now.timestamp_millis());
                        state.pauses.remove(job);
                        let kept = state.pause_windows.remove(job).unwrap_or_default();
                        let from = pause.as_ref().map(|p| p.at.as_str());
                        let windows = windows_after_resume(&kept, from, now);
                        if !windows.is_empty() {
                            state.pause_windows.insert(job.to_string(), windows);
                        }
                        true
                    })
                    .await?;
                if passed {
                    return Ok(pause);
                }
                refused = pause;
            }
            Err(StoreError::Unavailable(format!(
                "resuming {job}: paused and resumed by others {RESUME_TRIES} times meanwhile"
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ExecutionStore;

    fn at(minute: u32) -> DateTime<Utc> {
        format!("2026-12-02T00:{minute:02}:00Z").parse().unwrap()
    }

    fn record(by: &str) -> PauseRecord {
        PauseRecord {
            job: "j".into(),
            by: by.into(),
            at: "2026-12-02T00:00:00Z".into(),
            reason: "why".into(),
        }
    }

    #[tokio::test]
    async fn a_pause_keeps_the_first_and_an_automatic_one_needs_its_streak() {
        let store = MemoryStore::default();
        assert_eq!(
            store
                .pause_after_streak(&record("worker"), 2)
                .await
                .unwrap(),
            Paused::StreakEnded
        );
        ExecutionStore::count_failure(&store, "j", "k1", "e", 2, at(1))
            .await
            .unwrap();
        ExecutionStore::count_failure(&store, "j", "k2", "e", 2, at(1))
            .await
            .unwrap();
        assert_eq!(
            store.pause(&record("ops")).await.unwrap(),
            Paused::Now,
            "an operator's pause needs no streak"
        );
        assert_eq!(
            store
                .pause_after_streak(&record("worker"), 2)
                .await
                .unwrap(),
            Paused::Already(record("ops")),
            "the operator's pause is kept"
        );
        assert_eq!(store.resume("j", at(2)).await.unwrap(), Some(record("ops")));
        assert_eq!(
            store
                .pause_after_streak(&record("worker"), 2)
                .await
                .unwrap(),
            Paused::StreakEnded,
            "a resume forgets the streak"
        );
        assert_eq!(store.pause_of("j").await.unwrap(), None);
        assert_eq!(
            ExecutionStore::count_failure(&store, "j", "k1", "e", 2, at(1))
                .await
                .unwrap(),
            0,
            "a run that failed before the resume is not counted again"
        );
        assert_eq!(
            ExecutionStore::count_failure(&store, "j", "k3", "e", 2, at(3))
                .await
                .unwrap(),
            1
        );
    }

    /// A resume whose write the SDK sent again (applied, its answer lost): the second try
    /// is refused by the first, which removed the pause. The resume is the operator's, and
    /// says which pause it ended (it answered that the job had not been paused).
    #[tokio::test]
    async fn a_resume_whose_write_was_sent_again_says_the_pause_it_ended() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};

        use crate::store::{Fault, Faults};

        #[derive(Debug)]
        struct RetriedResume(AtomicBool);
        impl Faults for RetriedResume {
            fn request(&self, request: &'static str, _: &str) -> (std::time::Duration, Fault) {
                let retried = request == "resume" && self.0.swap(false, Ordering::SeqCst);
                let fault = if retried { Fault::Retried } else { Fault::None };
                (std::time::Duration::ZERO, fault)
            }
        }
        let store = MemoryStore::new(Arc::new(RetriedResume(AtomicBool::new(true))));
        store.pause(&record("ops")).await.unwrap();
        assert_eq!(store.resume("j", at(2)).await.unwrap(), Some(record("ops")));
        assert_eq!(store.pause_of("j").await.unwrap(), None);
        let windows = store.snapshot().pause_windows["j"].clone();
        assert_eq!(windows.len(), 1, "{windows:?}");
    }
}
