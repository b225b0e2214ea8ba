//! The memory store's pause records: the same decisions as [`super::Pauses`]' conditional
//! writes (a pause never overwrites a pause; an automatic one only while its streak holds;
//! a resume ends the pause and the streak together), each one request that meets the
//! store's faults.

use chrono::{DateTime, Utc};

use super::memory::MemoryStore;
use super::pauses::{PauseRecord, PauseStore, Paused, windows_after_resume};
use super::{StoreCall, StoreError};

impl MemoryStore {
    async fn write_pause(
        &self,
        pause: &PauseRecord,
        streak: Option<u32>,
    ) -> Result<Paused, StoreError> {
        self.request("pause", &pause.job, |state| {
            if let Some(existing) = state.pauses.get(&pause.job) {
                return Paused::Already(existing.clone());
            }
            let counted = state.streaks.get(&pause.job).map_or(0, |k| k.len() as u32);
            if streak.is_some_and(|n| counted < n) {
                return Paused::StreakEnded;
            }
            state.pauses.insert(pause.job.clone(), pause.clone());
            Paused::Now
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
        Box::pin(self.request("resume", job, move |state| {
            state.streaks.remove(job);
            state
                .resumed_at_ms
                .insert(job.to_string(), now.timestamp_millis());
            let ended = state.pauses.remove(job);
            let kept = state.pause_windows.remove(job).unwrap_or_default();
            let windows = windows_after_resume(&kept, ended.as_ref().map(|p| p.at.as_str()), now);
            if !windows.is_empty() {
                state.pause_windows.insert(job.to_string(), windows);
            }
            ended
        }))
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
}
