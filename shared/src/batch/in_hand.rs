//! Step 5, admission, the wait in hand: a poller's run that a full gate refused, while
//! another run of the same poller holds a permit of that gate, keeps its message and its
//! claim and waits for that run to pass its permit on as its body
//! ends ([`crate::store::Pass`]): one conditional write moves the permit from the one to
//! the other, and the waiting run starts at once (the pass also names the run after it,
//! which then starts with no write between: [`super::in_hand_next`]). No give-back, no
//! park, no wake-up, no receive and no second claim: a permit freed and taken again
//! within a worker cost six
//! requests and two SQS round trips (`make bench-flow`'s 50 ms case ran at 0.05 of its
//! limit's pace, bound by them).
//!
//! The gate's line comes first: a permit is passed in hand only while no run waits in the
//! line (the write's condition), so a run parked by any worker is handed it instead, by
//! the usual release and hand-on, and the run waiting here waits on for the next permit
//! this worker frees. Workers whose runs hold permits stop parking runs, and a worker
//! whose runs hold none watches the gate instead of parking ([`super::in_hand_watch`]),
//! so the line stays empty and the permits pass in hand. A run waiting for a pass looks at
//! the gate again every [`PASS_OR_LOOK`] (a permit another worker gives back is not passed
//! here); once it has waited in hand as long as its lease spares ([`in_hand_budget`], at
//! most [`IN_HAND_FOR`]) and its job's `max_wait_seconds` allow, it joins the gate's line
//! as before. So does every run waiting in hand when its worker stops. Lambda never waits
//! in hand (an invocation hands its waits back at once), nor does a run at a gate with a
//! rate (a pass does not move the rate's next start), nor one holding another gate's
//! permit.
//!
//! Crash-safe as a permit is: the passed entry is the waiting run's own claim's, which
//! holds it while the run's record is RUNNING under that claim; a worker that dies with
//! runs waiting in hand leaves claims whose leases run out, and their messages come back.

use std::time::Duration;

use tokio::time::Instant;

use super::claim::Claim;
use super::in_hand_watch::Watch;
use super::pipeline::MessageCtx;
use super::processor::Processor;
use super::route::Routed;
use crate::flow::Gate;
use crate::store::{Holder, Pass};
use crate::telemetry::{Event, Transition};

/// The longest a run waits in hand in all before it joins the gate's line (less where its
/// lease spares less, [`in_hand_budget`]). Long, because a run that joins the line stops
/// every pass: at 5 s, three pollers of four places at a limit of 2 parked 216 of 300
/// 50 ms runs and took 56 s (`worker_logic::limits::pollers_holding_no_permit_...`: 8.7 s
/// at 30 s). The cost: a run waiting in hand holds one of its worker's places, so a
/// backlog's waiting runs fill them and a poller receives only as runs end. Behind a
/// backlog in one queue, a quiet tenant's run is received late, unless the queue delivers
/// it first: SQS fair queues do on AWS (runs carry their share as `MessageGroupId`), but
/// LocalStack keeps the queue's order (`make bench-flow`: 69 job durations behind 300,
/// from 12.7 at 5 s).
pub(super) const IN_HAND_FOR: Duration = Duration::from_secs(30);

/// The longest a run waits for the pass of a run of this worker before it asks the gate
/// again: a permit another worker gives back is not passed here, and is found so.
const PASS_OR_LOOK: Duration = Duration::from_secs(5);

/// How often a run whose wait ran out while a releaser's write was deciding about it
/// tries again to give up: it may be set as a later run's next, and wait no longer.
const GIVE_UP_AGAIN: Duration = Duration::from_millis(50);

/// What a wait in hand for a permit of one gate came to.
pub(super) enum Waited {
    /// The permit was passed: the run holds it (counted as this worker's already).
    Passed,
    /// Ask the gate again: a watcher's look came, or a pass went to the line, or no
    /// permit is held here any more.
    Look,
    /// The run does not wait in hand (Lambda, a gate with a rate, no time its lease
    /// spares), or its wait ran out: it waits in the gate's line.
    Over,
}

/// How long a claimed run may wait in hand: [`IN_HAND_FOR`] at most, and never so long
/// that its lease, counted from its claim, could run out before the first heartbeat its
/// body sends (one interval after the body starts, as the lease keeper counts it, less
/// the clock-skew bound). A job without heartbeats has its whole lease for its body: none.
pub(super) fn in_hand_budget(
    claimed: tokio::time::Instant,
    lease: Duration,
    heartbeat: Option<Duration>,
    skew: Duration,
) -> Duration {
    let Some(every) = heartbeat else {
        return Duration::ZERO;
    };
    let spare = lease
        .saturating_sub(skew)
        .saturating_sub(every)
        .saturating_sub(claimed.elapsed())
        .saturating_sub(Duration::from_millis(250));
    spare.min(IN_HAND_FOR)
}

/// A run's wait in hand across the gate's refusals.
#[derive(Debug, Default)]
pub(super) struct InHandWait {
    /// When it ends: set at its first refusal.
    pub until: Option<Instant>,
    /// The looks it made while it watched the gate.
    pub looked: u32,
}

impl Processor {
    /// Waits in hand for a permit of the full `gate` for the claimed run, its entry its
    /// claim's, until `until` (set at its first refusal from [`in_hand_budget`]): for the
    /// pass of a run of this worker that holds one, or, while none is held here and the
    /// run `watch`es ([`super::in_hand_watch`]), for its next look at the gate. A gate
    /// with a rate is never waited for in hand: a pass does not move its next start.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn in_hand_for(
        &self,
        ctx: &MessageCtx<'_>,
        claim: &Claim,
        gate: &Gate,
        owner: &str,
        t: &Transition<'_>,
        (priority, since_ms, job): (i32, Option<i64>, &Routed<'_>),
        (watch, wait): (bool, &mut InHandWait),
    ) -> Waited {
        let (Some(limit), None) = (gate.concurrency, gate.spacing) else {
            return Waited::Over;
        };
        if ctx.deadline.is_some() || self.inner.in_hand.stopping() {
            return Waited::Over;
        }
        let policy = &job.registered.policy;
        let claimed_ms = claim.request.now.timestamp_millis();
        let holder = Holder {
            owner: owner.to_string(),
            until_ms: claimed_ms + policy.lease.as_millis() as i64,
            share: gate.share.clone(),
            then: None,
        };
        let skew = self.inner.config.clock_skew;
        let since_ms = since_ms.unwrap_or(claimed_ms);
        let until = *wait.until.get_or_insert_with(|| {
            let most = in_hand_budget(claim.claimed_at, policy.lease, policy.heartbeat, skew);
            // Never past the job's max_wait_seconds: its run is dead-lettered then.
            let now_ms = self.inner.config.clock.now().timestamp_millis();
            let waited = Duration::from_millis((now_ms - since_ms).max(0) as u64);
            let left = policy.flow.max_wait.map(|max| max.saturating_sub(waited));
            Instant::now() + left.map_or(most, |left| left.min(most))
        });
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Waited::Over;
            }
            let waits = (priority, since_ms, left.min(PASS_OR_LOOK));
            match self.wait_in_hand(gate, holder.clone(), waits, t).await {
                Some(true) => return Waited::Passed,
                Some(false) => return Waited::Look,
                None if !watch => return Waited::Over,
                None => match self
                    .inner
                    .in_hand
                    .watch((&gate.item, &gate.share), until, wait.looked, limit)
                    .await
                {
                    Watch::Held => continue,
                    Watch::Look => {
                        wait.looked += 1;
                        return Waited::Look;
                    }
                    Watch::Over => return Waited::Over,
                },
            }
        }
    }

    /// Waits in hand for a run of this worker holding a permit of `gate` to pass it on,
    /// for at most `most`: whether it was passed; None when no run here holds one.
    async fn wait_in_hand(
        &self,
        gate: &Gate,
        holder: Holder,
        (priority, since_ms, most): (i32, i64, Duration),
        t: &Transition<'_>,
    ) -> Option<bool> {
        let waiters = &self.inner.in_hand;
        let waits = (priority, since_ms, most);
        let waiting = waiters.wait(&gate.item, t.key, holder, waits)?;
        let mut told = waiting.told;
        // Dropped half-way (its walk aborted), the run stops waiting: no pass to it.
        let abandoned = waiters.give_up_if_dropped(&gate.item, waiting.id);
        let passed = match tokio::time::timeout(most, &mut told).await {
            Ok(answer) => answer.unwrap_or(false),
            // Taken by a releaser just now: its answer comes with its write, unless the
            // write sets it as the run after the one passed to: then it gives up.
            Err(_) => loop {
                if waiters.give_up(&gate.item, waiting.id) {
                    break false;
                }
                match tokio::time::timeout(GIVE_UP_AGAIN, &mut told).await {
                    Ok(answer) => break answer.unwrap_or(false),
                    Err(_) => continue,
                }
            },
        };
        abandoned.disarm();
        if !passed {
            // Looks again: counted as held back there, if it is.
            return Some(false);
        }
        let why = format!(
            "`{}` was full; waited in hand for a permit this worker held (as `{}`)",
            gate.limit, gate.share
        );
        let limit = &gate.limit;
        self.emit(t, Event::Throttled { limit, why: &why });
        Some(true)
    }

    /// Passes the permit of the gate `item` that the run `key` holds under `owner` to a
    /// run of this worker waiting in hand, if one waits and the gate's line is empty:
    /// true when passed (the permit is that run's now).
    pub(super) async fn pass_in_hand(
        &self,
        item: &str,
        limit: u32,
        (key, owner): (&str, &str),
        t: &Transition<'_>,
    ) -> bool {
        let waiters = &self.inner.in_hand;
        let Some(next) = waiters.next(item).or_else(|| waiters.steal_next(item)) else {
            return false;
        };
        let to = next.key.clone();
        // The run after it, if one waits, is named in the entry: it starts when this
        // one's body ends, with no request ([`super::in_hand_next`]).
        let (entry, after) = self.entry_with_next(item, &next.holder);
        let pass = Pass {
            item,
            limit,
            from: (key, owner),
            to: (&to, &entry),
            promote: false,
        };
        let answer = self.inner.store.pass_permit(pass).await;
        let passed = matches!(answer, Ok(Ok(_)));
        match (after, passed) {
            (Some(after), true) => {
                let to = (to.as_str(), next.holder.owner.as_str());
                self.inner.in_hand.set_next(item, to, after)
            }
            (Some(after), false) => self.inner.in_hand.put_back(item, after),
            (None, _) => {}
        }
        let passed = match answer {
            // The gate as the pass left it: a run arriving here decides from it, rather
            // than ask the gate (a permit free there is seen without a request).
            Ok(Ok(gate)) => {
                self.inner.looks.saw(item, &gate);
                true
            }
            // Runs wait in the gate's line: they come first. The run waiting here waits on
            // for the next permit this worker frees, once the line is empty, or until its
            // wait runs out (then it joins the line).
            Ok(Err(seen)) if !seen.waiters.is_empty() => {
                self.inner.in_hand.put_back(item, next);
                return false;
            }
            // The entry is not this claim's any more: given back and handed on as usual.
            Ok(Err(_)) => false,
            Err(e) => {
                // The pass may have been applied with its answer lost: the waiting run
                // looks again, and the entry, its claim's, goes with its claim.
                let error = format!("could not pass the permit on in hand to `{to}`: {e}");
                self.emit(t, Event::HandedOn { note: &error });
                false
            }
        };
        if passed {
            let note = format!("passed on in hand to `{to}`");
            self.emit(t, Event::HandedOn { note: &note });
        }
        // The permit's count moves with it. A run no longer there to hear (its walk
        // ended) holds it by its claim until its lease runs out: no longer counted here.
        let owner = next.holder.owner.clone();
        if next.told.send(passed).is_err() && passed {
            self.inner.in_hand.forget_next(item, (&to, &owner));
            self.released_in_hand(item);
        }
        passed
    }

    /// A run of this worker gave a permit of `item` back: the runs waiting in hand for
    /// it, once none is held here, are told to look again.
    pub(super) fn released_in_hand(&self, item: &str) {
        for waiter in self.inner.in_hand.released(item) {
            let _ = waiter.told.send(false);
        }
    }

    /// Permits the run `key` keeps past its walk (its body stopped and its outcome not
    /// written: their entries go with its claim): no longer counted as this worker's,
    /// and the run set to come after it is told none comes.
    pub(super) fn forget_in_hand<'a>(
        &self,
        (key, owner): (&str, &str),
        items: impl IntoIterator<Item = &'a str>,
    ) {
        for item in items {
            self.inner.in_hand.forget_next(item, (key, owner));
            self.released_in_hand(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_run_waits_in_hand_only_what_its_lease_spares_before_its_first_heartbeat() {
        let now = tokio::time::Instant::now();
        let s = Duration::from_secs;
        let skew = Duration::from_millis(500);
        // Lease 10 s, heartbeats every 7 s: 10 - 0.5 - 7 - 0.25.
        assert_eq!(
            in_hand_budget(now, s(10), Some(s(7)), skew),
            Duration::from_millis(2_250)
        );
        // Time since the claim counts.
        tokio::time::advance(s(2)).await;
        assert_eq!(
            in_hand_budget(now, s(10), Some(s(7)), skew),
            Duration::from_millis(250)
        );
        // A long lease: at most IN_HAND_FOR.
        assert_eq!(in_hand_budget(now, s(600), Some(s(150)), skew), IN_HAND_FOR);
        // No heartbeats: the lease is the body's.
        assert_eq!(in_hand_budget(now, s(600), None, skew), Duration::ZERO);
        // A one-second lease spares nothing.
        let fresh = tokio::time::Instant::now();
        let quarter = Duration::from_millis(250);
        assert_eq!(
            in_hand_budget(fresh, s(1), Some(quarter), skew),
            Duration::ZERO
        );
    }
}
