//! Step 5, admission, the wait: a run a full gate refused parks in the gate's line and is
//! woken by the run that frees a permit, instead of looking again on a timer (see
//! [`crate::store::Waiter`] for the line itself and why it is crash-safe).
//!
//! Parking: the run's message is hidden for [`PARKED_FOR`] first, then the run is written
//! into the line with the message's receipt handle (in that order: a waker that wakes it
//! between the two cannot be undone by the hiding). Waking: the run that gives a permit
//! back hands it on to the waiter that comes first, as a reservation in the gate's
//! holders, and makes that waiter's message visible at once.

use std::time::Duration;

use super::outcome::Outcome;
use super::pipeline::{MessageCtx, Step};
use super::processor::Processor;
use crate::flow::Gate;
use crate::store::{
    GateItem, HANDED, HandOn, Line, PARKED_FOR, ParkRequest, Parked, Waiter, next_waiter,
    reservation, served_after,
};
use crate::telemetry::{Event, Transition};

/// Receives after which a waiting message is sent again as a new copy instead of parked
/// once more: each wake-up is a receive, and SQS dead-letters a message received
/// `maxReceiveCount` times (15 by the template's count, less a job's attempts).
const PARK_RECEIVES: u32 = 6;

/// How often the first run in a line looks whether a holder whose lease hint has passed
/// (a run its heartbeats keep) is gone: a holder that dies never releases, so someone
/// must look, and one look every few seconds by one run per gate is enough.
const WATCH: Duration = Duration::from_secs(5);

/// How long a parked run's message stays hidden: [`PARKED_FOR`] (and no longer than its
/// `left` wait), but the first run in the line comes back soon after the soonest holder's
/// lease hint runs out (allowing the clock-skew bound), to drop that holder if it died:
/// a dead holder's permit returns within its lease and a few seconds, as it did when every
/// waiting run looked again on a timer.
fn hiding(line: &Line, now_ms: i64, skew: Duration, left: Duration) -> Duration {
    let mut hide = PARKED_FOR.min(left);
    if line.waiting == 0
        && let Some(until) = line.soonest_until_ms
    {
        let out = until + skew.as_millis() as i64 + 500 - now_ms;
        let watch = match out > 0 {
            true => Duration::from_millis(out as u64),
            false => WATCH,
        };
        hide = hide.min(watch);
    }
    hide.max(Duration::from_secs(1))
}

/// The most permits one release hands on (a gate freed of more at once, by a holder
/// dropped as gone, hands the rest on at its next release or park).
const MOST_HANDED: usize = 4;

/// Why a run waits, as its log line says it.
fn waiting_why(gate: &Gate, line: &Line, holders: usize) -> String {
    let limit = gate.concurrency.unwrap_or_default();
    format!(
        "`{}` is full ({holders} of {limit} held, {} waiting before it); waits in line as `{}`",
        gate.limit, line.waiting, gate.share
    )
}

impl Processor {
    /// A run woken to take a permit handed on to it that will not run (a duplicate, a
    /// cancelled run, a firing skipped): the reservation is passed on at once to the next
    /// waiter, instead of holding the permit idle until it runs out. Only a message
    /// received before may have been woken.
    pub(super) async fn not_coming<T>(
        &self,
        ctx: &MessageCtx<'_>,
        gates: &[Gate],
        step: Step<T>,
        t: &Transition<'_>,
    ) -> Step<T> {
        let decided = matches!(
            &step,
            Err(Outcome::Duplicate
                | Outcome::Skipped
                | Outcome::Cancelled
                | Outcome::DeadLettered { .. })
        );
        if !decided || ctx.delivery.receive_count < 2 {
            return step;
        }
        for gate in gates {
            let Some(limit) = gate.concurrency else {
                continue;
            };
            let store = &self.inner.store;
            match store.release_permit(&gate.item, t.key, HANDED).await {
                Ok(after) => self.hand_on(&gate.item, limit, after, None, t).await,
                Err(e) => {
                    let error = e.to_string();
                    self.emit(t, Event::PermitKept { error: &error });
                }
            }
        }
        step
    }

    /// Parks the run (its claim already given back) in the line of the full `gate`:
    /// `Some(outcome)` when it waits there, None when it must look again on a timer (no
    /// receipt to wake it by, received too often, the line full, or the gate has room).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn park(
        &self,
        ctx: &MessageCtx<'_>,
        gate: &Gate,
        line: &Line,
        holders: usize,
        since_ms: i64,
        priority: i32,
        hide_for: Duration,
        t: &Transition<'_>,
    ) -> Option<Outcome> {
        let limit = gate.concurrency?;
        let receipt = ctx.receipt()?;
        // Received too often, or no place in the line when the gate refused it (a park
        // would be refused too: a write saved).
        if ctx.delivery.receive_count >= PARK_RECEIVES || !line.place {
            return None;
        }
        let now_ms = self.inner.config.clock.now().timestamp_millis();
        let skew = self.inner.config.clock_skew;
        let hide_for = hiding(line, now_ms, skew, hide_for);
        let secs = hide_for.as_secs_f64().ceil() as i32;
        if let Err(e) = self.inner.queue.change_visibility(receipt, secs).await {
            tracing::warn!(error = %e, "could not hide the waiting message; looking again on a timer");
            return None;
        }
        let req = ParkRequest {
            item: &gate.item,
            key: t.key,
            limit,
            waiter: Waiter {
                since_ms,
                priority,
                share: gate.share.clone(),
                handle: receipt.to_string(),
                until_ms: now_ms + hide_for.as_millis() as i64,
            },
            now_ms,
        };
        match self.inner.store.park(req, line.map).await {
            Ok(Parked::Waiting(after)) => {
                let why = waiting_why(gate, line, holders);
                self.emit(
                    t,
                    Event::Throttled {
                        limit: &gate.limit,
                        why: &why,
                    },
                );
                // A permit free while others wait: its waker died before it could hand
                // it on (or this run came between): handed on now.
                self.hand_on(&gate.item, limit, after, None, t).await;
                Some(Outcome::Parked {
                    limit: gate.limit.clone(),
                })
            }
            Ok(Parked::Room | Parked::Crowded) => None,
            Err(e) => {
                tracing::warn!(error = %e, "could not park the waiting run; looking again on a timer");
                None
            }
        }
    }

    /// Hands the free permits of the gate `item` (as `gate` shows it) on to the runs that
    /// wait for them, each to the one that comes first, and wakes each. A permit a run
    /// gave back (`released_by`: its fair share) counts as its share's last turn: runs of
    /// that share took permits in hand or at a look, unseen by the line's record of turns,
    /// and a run of another share holding as few comes before them (else a quiet tenant's
    /// run waited behind the backlog's runs that joined the line before it, by their since).
    pub(super) async fn hand_on(
        &self,
        item: &str,
        limit: u32,
        gate: GateItem,
        released_by: Option<&str>,
        t: &Transition<'_>,
    ) {
        let now_ms = self.inner.config.clock.now().timestamp_millis();
        let mut gate = served_by_release(gate, released_by, now_ms);
        for _ in 0..MOST_HANDED {
            if gate.holders.len() >= limit as usize {
                return;
            }
            let now_ms = self.inner.config.clock.now().timestamp_millis();
            let Some((key, waiter)) = next_waiter(&gate, now_ms) else {
                return;
            };
            let (key, waiter) = (key.clone(), waiter.clone());
            let h = HandOn {
                item,
                key: &key,
                waiter: &waiter,
                limit,
                now_ms,
                served: served_after(&gate, &waiter.share, now_ms),
            };
            let held = reservation(&h);
            gate = match self.inner.store.hand_on(h).await {
                Ok(Ok(after)) => {
                    self.wake(item, &key, &waiter, &held.owner, t).await;
                    after
                }
                // The gate as another write left it: the giver's turn still counts.
                Ok(Err(seen)) => served_by_release(seen, released_by, now_ms),
                Err(e) => {
                    // The waiters come back by themselves once their hiding runs out.
                    let error = format!("could not hand the permit on to `{key}`: {e}");
                    self.emit(t, Event::HandedOn { note: &error });
                    return;
                }
            };
        }
    }

    /// Wakes the waiter `key` its permit was handed on to. A message that cannot be woken
    /// (deleted meanwhile, its run cancelled or a duplicate; or received again already)
    /// gives its reservation back at once for the next waiter, rather than hold the permit
    /// idle until the reservation runs out: a run received again takes the permit as any
    /// run does.
    async fn wake(&self, item: &str, key: &str, waiter: &Waiter, held: &str, t: &Transition<'_>) {
        match self.inner.queue.change_visibility(&waiter.handle, 0).await {
            Ok(()) => {
                let note = format!("handed on to `{key}` (waiting as `{}`)", waiter.share);
                self.emit(t, Event::HandedOn { note: &note });
            }
            Err(e) => {
                let note = format!(
                    "handed on to `{key}`, whose message could not be woken ({e}); given back"
                );
                self.emit(t, Event::HandedOn { note: &note });
                if let Err(e) = self.inner.store.release_permit(item, key, held).await {
                    let error = e.to_string();
                    self.emit(t, Event::PermitKept { error: &error });
                }
            }
        }
    }
}

/// The gate as a hand-on orders its line: the share whose run gave the permit back
/// (`released_by`) served at `now_ms`, when runs of it wait (see [`Processor::hand_on`]).
fn served_by_release(gate: GateItem, released_by: Option<&str>, now_ms: i64) -> GateItem {
    let mut gate = gate;
    if let Some(share) = released_by
        && gate.waiters.values().any(|w| w.share == share)
    {
        gate.served.insert(share.to_string(), now_ms);
    }
    gate
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Waiter;

    #[test]
    fn a_permit_a_share_gave_back_goes_to_another_share_waiting_since_later() {
        let waiter = |since_ms, share: &str| Waiter {
            since_ms,
            priority: 0,
            share: share.into(),
            handle: String::new(),
            until_ms: 0,
        };
        let mut gate = GateItem::default();
        gate.waiters.insert("noisy".into(), waiter(1_000, "a"));
        gate.waiters.insert("quiet".into(), waiter(5_000, "b"));
        let first = |g: &GateItem| next_waiter(g, 9_000).map(|(k, _)| k.clone());
        assert_eq!(
            first(&gate),
            Some("noisy".into()),
            "neither served: the longest waiting"
        );
        let after = served_by_release(gate.clone(), Some("a"), 9_000);
        assert_eq!(first(&after), Some("quiet".into()), "`a` just had its turn");
        assert_eq!(after.served.get("a"), Some(&9_000), "and the line keeps it");
        let unknown = served_by_release(gate, Some("c"), 9_000);
        assert!(unknown.served.is_empty(), "no run of `c` waits: not kept");
    }

    #[test]
    fn the_first_in_line_comes_back_when_the_soonest_holders_lease_hint_runs_out() {
        let skew = Duration::from_millis(500);
        let long = Duration::from_secs(3600);
        let line = |waiting, soonest| Line {
            map: true,
            waiting,
            since_ms: None,
            soonest_until_ms: soonest,
            place: true,
            ..Line::default()
        };
        let at = |l: &Line, left| hiding(l, 10_000, skew, left).as_millis();
        assert_eq!(
            at(&line(0, Some(14_000)), long),
            5_000,
            "hint, skew and a margin"
        );
        assert_eq!(
            at(&line(0, Some(9_000)), long),
            WATCH.as_millis(),
            "kept by heartbeats"
        );
        assert_eq!(
            at(&line(3, Some(14_000)), long),
            PARKED_FOR.as_millis(),
            "not first"
        );
        assert_eq!(at(&line(0, Some(900_000)), long), PARKED_FOR.as_millis());
        let left = Duration::from_secs(2);
        assert_eq!(at(&line(3, None), left), 2_000, "never past its max_wait");
        assert_eq!(at(&line(0, Some(9_500)), long), 1_000, "at least a second");
    }
}
