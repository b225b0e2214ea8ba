//! Runs this worker knows have no place in a full gate's line, sent back before any claim.
//!
//! A backlog larger than a gate's line (a tenant's thousand runs behind a limit of 4)
//! costs each of its looks a claim, a take, a give-back, a send and a delete, and keeps
//! the queue busy in front of another tenant's run (`make bench-flow`'s backlog rows).
//! Once a take in this worker found no place in a
//! gate's line for a share at a priority ([`Line::place`](crate::store::Line)), the next
//! runs of that gate and share, of that priority or lower and waiting since no earlier,
//! within [`FRESH`](super::no_place_seen::FRESH) cannot find one either: their betters fill
//! the line. Their copies are sent back at once to look again later
//! (2 s doubling to 30 s, as a refused run with no place does), with no request to the
//! table: two to the queue. A run of another share, or of a higher priority, goes the
//! whole way and may take a place ([`crate::store::bumped`]). So are the runs of a fair
//! gate crowded here ([`super::crowded`]): as many of their share are on their way into
//! it in this worker as it holds of the gate's permits.
//!
//! Nothing here decides anything about a run: it is delayed, unclaimed, exactly as the
//! refusal it stands for would have delayed it. Only a copy sent back after a refusal is
//! sent back so, at its first receive: its run was claimed and given back before (its
//! record exists, REGISTERED, for a cancel to find), and the copy says since when it waits
//! (`schedkit.waiting-since`), so `max_wait_seconds` still counts from its first refusal.
//! A run that waited longer than the refused one, or of a higher priority, may have a
//! place: it goes the whole way. So do a first delivery, a copy received before (a woken
//! waiter, a parked run come back), a run past its `max_wait`, and a chain's step (it
//! keeps its Step Functions task alive at each refusal).

use tokio::time::Duration;

use super::crowded::{Entering, crowded_why};
use super::limits::{no_place_look, priority_of};
use super::no_place_seen::FRESH;
use super::pipeline::{MessageCtx, Step};
use super::processor::Processor;
use super::route::Routed;
use crate::envelope::Envelope;
use crate::flow::Gate;
use crate::store::PARKED_FOR;
use crate::telemetry::{Event, Transition};

use super::outcome::Outcome;

impl Processor {
    /// Sends the run back unclaimed when this worker knows it has no place in one of its
    /// gates' lines, or a fair gate is crowded here ([`super::crowded`]); goes on
    /// otherwise, counted on its way into that gate until its entry into its limits ends.
    pub(super) async fn no_place(
        &self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        job: &Routed<'_>,
        gates: &[Gate],
        t: &Transition<'_>,
    ) -> Step<Entering> {
        if job.step_of.is_some() {
            return Ok(Entering::none());
        }
        let now_ms = self.inner.config.clock.now().timestamp_millis();
        let priority = priority_of(envelope, job);
        // Only a first delivery or a copy sent back after a refusal, each received for the
        // first time, is sent away unclaimed. A copy's run was claimed and given back
        // before (its record exists, for a cancel to find), and the copy says since when
        // it waits; a first delivery has nothing written yet. A message received before
        // may be a woken waiter, a parked one or a hidden one come back: it goes the
        // whole way.
        let fresh = ctx.delivery.receive_count <= 1;
        let since = ctx.delivery.waiting_since_any().filter(|_| fresh);
        let max_wait = job.registered.policy.flow.max_wait;
        let waited = since.map(|s| Duration::from_millis((now_ms - s.1).max(0) as u64));
        // Past its max_wait it goes the whole way, to its letter.
        if waited.is_some_and(|w| max_wait.is_some_and(|max| w > max)) {
            return Ok(self
                .enter_gates(gates, priority, false)
                .unwrap_or_else(|_| Entering::none()));
        }
        let left = match (max_wait, waited) {
            (Some(max), Some(waited)) => max - waited + Duration::from_secs(1),
            (Some(max), None) => max,
            (None, _) => PARKED_FOR,
        };
        if let Some(since) = since {
            let seen = &self.inner.no_place;
            let known = |g: &&Gate| {
                g.concurrency.is_some() && seen.known(&g.item, &g.share, priority, since.1)
            };
            if let Some(gate) = gates.iter().find(known) {
                let jitter = self.inner.draws.jitter(Duration::from_secs(2));
                let look = no_place_look(ctx.delivery.waits(), jitter, left);
                let resent = self.come_back_waiting(ctx, look, Some(since)).await;
                let why = format!(
                    "no place in `{}`'s line for `{}` (a take in this worker found none within {} s); looks again in {} s, unclaimed",
                    gate.limit,
                    gate.share,
                    FRESH.as_secs(),
                    look.as_secs()
                );
                return Err(self.sent_away(gate, look, resent, &why, t));
            }
        }
        // A Lambda invocation holds no run waiting in hand, so no place fills (and a hide
        // left to be sent after it returns might never be): nothing is counted there.
        if ctx.deadline.is_some() {
            return Ok(Entering::none());
        }
        let (gate, crowded) = match self.enter_gates(gates, priority, fresh) {
            Ok(entering) => return Ok(entering),
            Err(crowded) => crowded,
        };
        let look = crowded.look(left);
        let why = crowded_why(gate, &crowded);
        let (resent, why) = match since {
            None => {
                self.hide_soon(ctx, look).await;
                let why = format!(
                    "{why}; hidden {} s until its turn, unclaimed",
                    look.as_secs()
                );
                (false, why)
            }
            Some(since) => {
                let resent = self.come_back_waiting(ctx, look, Some(since)).await;
                (
                    resent,
                    format!("{why}; looks again in {} s, unclaimed", look.as_secs()),
                )
            }
        };
        Err(self.sent_away(gate, look, resent, &why, t))
    }

    /// The outcome of a run sent away unclaimed, logged.
    fn sent_away(
        &self,
        gate: &Gate,
        look: Duration,
        resent: bool,
        why: &str,
        t: &Transition<'_>,
    ) -> Outcome {
        let limit = &gate.limit;
        self.emit(t, Event::Throttled { limit, why });
        Outcome::Throttled {
            limit: limit.clone(),
            retry_in: look,
            resent,
        }
    }
}
