//! Step 5, admission, the wait in hand: a poller's run that a full gate refused, while
//! another run of the same poller holds a permit of that gate, keeps its message and its
//! claim and waits, for a short while, for that run to pass its permit on as its body
//! ends ([`crate::store::Pass`]): one conditional write moves the permit from the one to
//! the other, and the waiting run starts at once. No give-back, no park, no wake-up, no
//! receive and no second claim: a permit freed and taken again within a worker cost six
//! requests and two SQS round trips (`make bench-flow`'s 50 ms case ran at 0.05 of its
//! limit's pace, bound by them).
//!
//! The gate's line comes first: a permit is passed in hand only while no run waits in the
//! line (the write's condition), so a run parked by any worker is handed it instead, by
//! the usual release and hand-on. A run that waited in hand past [`IN_HAND_FOR`] (or was
//! told no permit is coming) looks at the gate again, and waits in its line as before.
//! Lambda never waits in hand: an invocation hands its waits back at once.
//!
//! Crash-safe as a permit is: the passed entry is the waiting run's own claim's, which
//! holds it while the run's record is RUNNING under that claim; a worker that dies with
//! runs waiting in hand leaves claims whose leases run out, and their messages come back.

use std::time::Duration;

use super::in_hand_waiters::InHandWaiter;
use super::pipeline::MessageCtx;
use super::processor::Processor;
use crate::flow::Gate;
use crate::store::{Holder, Pass};
use crate::telemetry::{Event, Transition};

/// The longest a run waits in hand before it looks at the gate again: a few job
/// durations of the short jobs it serves, and far inside any lease it holds its claim by.
pub(super) const IN_HAND_FOR: Duration = Duration::from_secs(5);

/// What a wait in hand came to.
pub(super) enum InHand {
    /// No run of this worker holds the gate: nothing to wait for here.
    NotWaited,
    /// The permit was passed: the run holds it.
    Passed,
    /// No permit came (or another worker's run came first): look at the gate again.
    LookAgain,
}

impl Processor {
    /// Waits in hand for a permit of `gate` (see the module), the run's claim kept:
    /// `holder` is its entry, once passed. At most a third of its lease: heartbeats start
    /// with the body, a quarter of the lease apart, and must find the claim theirs.
    pub(super) async fn wait_in_hand(
        &self,
        ctx: &MessageCtx<'_>,
        gate: &Gate,
        holder: Holder,
        (priority, since_ms, lease): (i32, i64, Duration),
        t: &Transition<'_>,
    ) -> InHand {
        if ctx.deadline.is_some() || gate.concurrency.is_none() {
            return InHand::NotWaited;
        }
        let waiters = &self.inner.in_hand;
        let Some(waiting) = waiters.wait(&gate.item, t.key, holder, (priority, since_ms)) else {
            return InHand::NotWaited;
        };
        let why = format!(
            "`{}` is full; waits in hand for a permit this worker holds (as `{}`)",
            gate.limit, gate.share
        );
        let limit = &gate.limit;
        self.emit(t, Event::Throttled { limit, why: &why });
        let mut told = waiting.told;
        let most = IN_HAND_FOR.min(lease / 3);
        let passed = match tokio::time::timeout(most, &mut told).await {
            Ok(answer) => answer.unwrap_or(false),
            // Taken by a releaser just now: its answer comes with its write.
            Err(_) if !waiters.give_up(&gate.item, waiting.id) => told.await.unwrap_or(false),
            Err(_) => false,
        };
        match passed {
            true => InHand::Passed,
            false => InHand::LookAgain,
        }
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
        let Some(next) = self.inner.in_hand.next(item) else {
            return false;
        };
        let InHandWaiter {
            key: to,
            holder,
            told,
            ..
        } = next;
        let pass = Pass {
            item,
            limit,
            from: (key, owner),
            to: (&to, &holder),
        };
        let passed = match self.inner.store.pass_permit(pass).await {
            Ok(Ok(_)) => true,
            // Runs wait in the gate's line (they come first): every run waiting here
            // looks again now, to join it, rather than wait for a pass that cannot come.
            Ok(Err(seen)) if !seen.waiters.is_empty() => {
                for waiter in self.inner.in_hand.let_go(item) {
                    let _ = waiter.told.send(false);
                }
                false
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
        let _ = told.send(passed);
        passed
    }

    /// A run of this worker gave a permit of `item` back: the runs waiting in hand for
    /// it, once none is held here, are told to look again.
    pub(super) fn released_in_hand(&self, item: &str) {
        for waiter in self.inner.in_hand.released(item) {
            let _ = waiter.told.send(false);
        }
    }
}
