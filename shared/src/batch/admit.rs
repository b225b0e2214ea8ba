//! Step 5, admission: whether a claimed run may start now. A run of a job whose catalog says
//! `overlap = "skip"` or `"buffer_one"` enters the job's slot first (after its claim, so a
//! message the claim decided never holds it); if the slot is held by a running run, the
//! claim is given back and the run is recorded SKIPPED (a new firing) or waits (a retry or
//! redrive of an existing run, or the one waiter `buffer_one` allows). A chain's step never
//! goes through its job's overlap policy: the chain orders its own steps, and a skipped step
//! could never run. A run that entered the slot leaves it once its outcome is written
//! ([`Processor::leave`], after `settle`).

use std::time::Duration;

use super::claim::Claim;
use super::outcome::Outcome;
use super::pipeline::{MessageCtx, Step, outcome_written};
use super::processor::Processor;
use super::route::Routed;
use crate::job::Overlap;
use crate::store::{ExecutionRecord, Gate, SlotEntry, Status, TransitionError};
use crate::telemetry::{Event, Transition};

/// How soon a run that exists already (a retry, a redrive) first looks again for its job's
/// slot.
const SLOT_RECHECK: Duration = Duration::from_secs(5);

/// The longest a waiting run goes between two looks at its job's slot.
const LONGEST_LOOK: Duration = Duration::from_secs(30);

/// When a run that waited `looks` times looks again, at the earliest `first`: twice as late
/// each time it found the slot still held (a long run's heartbeats can keep it far past its
/// guessed length), up to [`LONGEST_LOOK`]. Each look costs a handful of requests.
fn next_look(first: Duration, looks: u32) -> Duration {
    let spaced = Duration::from_secs(1u64 << looks.min(5));
    first.max(spaced).min(LONGEST_LOOK.max(first))
}

/// What an admitted run holds until its outcome is written.
#[must_use = "an entered slot is left once the outcome is written (`Processor::leave`)"]
pub(super) struct Admission {
    /// The run entered its job's overlap slot under this claim's owner token (what names
    /// the entry when it is left).
    entered: Option<String>,
}

impl Processor {
    /// Whether the claimed run may start now: admitted (in its job's slot, when its policy
    /// has one), or the message's outcome (waiting, or SKIPPED).
    pub(super) async fn admit(
        &self,
        ctx: &MessageCtx<'_>,
        job: &Routed<'_>,
        claim: &Claim,
        t: &Transition<'_>,
    ) -> Step<Admission> {
        let policy = &job.registered.policy;
        if policy.overlap == Overlap::Allow || job.step_of.is_some() {
            return Ok(Admission { entered: None });
        }
        let store = &self.inner.store;
        let gate = store
            .enter_slot(SlotEntry {
                job: t.job,
                key: t.key,
                owner: &claim.request.owner,
                policy: policy.overlap,
                now: claim.request.now,
                hold: policy.timeout.unwrap_or(policy.lease) + policy.lease,
            })
            .await;
        let running = match gate {
            Ok(Gate::Open) => {
                let entered = Some(claim.request.owner.clone());
                return Ok(Admission { entered });
            }
            Ok(Gate::Wait { retry_in }) => {
                let retry_in = next_look(retry_in, ctx.delivery.looks());
                return Err(self.wait(ctx, claim, retry_in, t).await);
            }
            Ok(Gate::Skip { running }) => running,
            Err(e) => return Err(self.give_back_after(ctx, claim, e, t).await),
        };
        if !is_new(claim.before.as_ref()) {
            let retry_in = next_look(SLOT_RECHECK, ctx.delivery.looks());
            return Err(self.wait(ctx, claim, retry_in, t).await);
        }
        Err(self.skip(ctx, claim, &running, t).await)
    }

    /// Leaves the slot the run entered, once its outcome is written. Not after a lost lease
    /// or an unknown outcome: the run may still be going on elsewhere, and the slot lapses
    /// by itself (or is taken over once the run is decided).
    pub(super) async fn leave(&self, admission: Admission, outcome: &Outcome, t: &Transition<'_>) {
        if outcome_written(outcome) {
            self.leave_entered(admission, t).await;
        }
    }

    /// Leaves the slot the run entered: its outcome is written, or it did not run (its
    /// limits held it back).
    pub(super) async fn leave_entered(&self, admission: Admission, t: &Transition<'_>) {
        if let Some(owner) = admission.entered.as_deref()
            && let Err(e) = self.inner.store.leave_slot(t.job, t.key, owner).await
        {
            let error = e.to_string();
            self.emit(t, Event::SlotKept { error: &error });
        }
    }

    /// A new firing while another run holds the slot: recorded SKIPPED, never run.
    async fn skip(
        &self,
        ctx: &MessageCtx<'_>,
        claim: &Claim,
        running: &str,
        t: &Transition<'_>,
    ) -> Outcome {
        let skipped = self
            .inner
            .store
            .skip_claimed(&claim.record, &claim.request, running)
            .await;
        match skipped {
            Ok(()) => {
                self.emit(t, Event::Skipped { running });
                Outcome::Skipped
            }
            Err(e) => self.claim_not_given_back(ctx, t, e).await,
        }
    }

    /// The run waits for its job's slot: its claim given back (no attempt spent), and the
    /// message back after `retry_in`.
    async fn wait(
        &self,
        ctx: &MessageCtx<'_>,
        claim: &Claim,
        retry_in: Duration,
        t: &Transition<'_>,
    ) -> Outcome {
        let given = self
            .inner
            .store
            .give_back(&claim.record, claim.before.as_ref(), &claim.request)
            .await;
        if let Err(e) = given {
            return self.claim_not_given_back(ctx, t, e).await;
        }
        let resent = self.come_back(ctx, retry_in).await;
        self.emit(t, Event::Waiting);
        Outcome::Waiting { retry_in, resent }
    }

    /// The store failed while the run was being admitted: its claim is given back (or
    /// lapses after its lease), and the message comes back to decide.
    pub(super) async fn give_back_after(
        &self,
        ctx: &MessageCtx<'_>,
        claim: &Claim,
        e: crate::store::StoreError,
        t: &Transition<'_>,
    ) -> Outcome {
        let given = self
            .inner
            .store
            .give_back(&claim.record, claim.before.as_ref(), &claim.request)
            .await;
        if let Err(kept) = given {
            let error = kept.to_string();
            self.emit(t, Event::ClaimKept { error: &error });
        }
        self.store_failed(ctx, t, e).await
    }

    /// A claim that could not be given back (or recorded SKIPPED): it lapses after its
    /// lease, and the message comes back to decide again.
    pub(super) async fn claim_not_given_back(
        &self,
        ctx: &MessageCtx<'_>,
        t: &Transition<'_>,
        e: TransitionError,
    ) -> Outcome {
        match e {
            TransitionError::Store(e) => self.store_failed(ctx, t, e).await,
            // Cancelled between its claim and giving it back: not run, acknowledged.
            TransitionError::LeaseLost { current: Some(c) } if c.status == Status::Cancelled => {
                self.cancelled(t, &c)
            }
            TransitionError::LeaseLost { .. } => {
                self.emit(t, Event::ClaimTakenOver);
                Outcome::LeaseLost
            }
        }
    }
}

/// Whether a claimed run is a new firing (skipped when its job's slot is taken) rather than
/// a run that has run before (a retry, a redrive: it waits). A run that never ran is new,
/// even if a claim of it was made and lost (a worker that died between its claim and its
/// admission) or it waited before (given back REGISTERED).
fn is_new(before: Option<&ExecutionRecord>) -> bool {
    before.is_none_or(|b| {
        b.history.is_empty() && matches!(b.status, Status::Registered | Status::Running)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{AttemptEntry, AttemptOutcome};

    fn record(status: Status, ran: bool) -> ExecutionRecord {
        let json = serde_json::json!({
            "execution_key": "k", "job": "j", "scheduled_for": "2026-12-01T00:00:00Z",
            "status": status, "payload_hash": "h", "created_at": "", "updated_at": "",
            "expires_at": 0,
        });
        let mut r: ExecutionRecord = serde_json::from_value(json).unwrap();
        if ran {
            r.history.push(AttemptEntry {
                attempt: 1,
                owner: "w:1".into(),
                started_at: String::new(),
                finished_at: String::new(),
                outcome: AttemptOutcome::Retrying,
                error: None,
                duration_ms: None,
                limit_wait: false,
            });
        }
        r
    }

    #[test]
    fn a_waiting_run_looks_again_later_each_time_up_to_half_a_minute() {
        let at = |first: u64, looks| next_look(Duration::from_secs(first), looks).as_secs();
        assert_eq!([at(1, 1), at(1, 2), at(1, 3), at(1, 9)], [2, 4, 8, 30]);
        assert_eq!(at(5, 1), 5, "never sooner than the slot's own guess");
        assert_eq!(at(45, 9), 45);
    }

    #[test]
    fn a_run_is_new_until_it_has_run() {
        assert!(is_new(None));
        assert!(
            is_new(Some(&record(Status::Registered, false))),
            "it waited before"
        );
        assert!(
            is_new(Some(&record(Status::Running, false))),
            "its claim was lost before its admission"
        );
        assert!(!is_new(Some(&record(Status::Retrying, true))), "a retry");
        assert!(!is_new(Some(&record(Status::Failed, true))), "a redrive");
        assert!(
            !is_new(Some(&record(Status::Running, true))),
            "taken over after a worker died running it"
        );
    }
}
