//! Step 5, admission, the next run set ahead: a permit passed in hand ([`super::in_hand`])
//! cost a write between one body's end and the next one's start (on LocalStack, under a
//! shared limit of 4 on a 50 ms job, some 45 ms of each 95 ms turn: 0.42 to 0.52 of the
//! limit's pace). So the pass that gives a run its permit also names, in the permit's
//! entry, the run of this worker that waits in hand to come after it ([`Holder::then`]).
//! When the first one's body ends, the named run is told at once and starts, with no
//! request; the write that moves the entry to its name (and names the one after it) goes
//! while its body runs ([`crate::store::Pass::promote`]). One write a turn, as before, off
//! the turn's path.
//!
//! Never over the limit: the two runs an entry names share its one permit, and the
//! worker starts the second only once the first one's body has ended. Crash-safe: a taker
//! drops the entry only once both runs' records say they no longer run (a run named next
//! is claimed, its record RUNNING, while it waits); a worker that dies leaves claims whose
//! leases run out. A run named next that stops waiting (its wait ran out, its walk
//! ended, the worker stops) is taken out here, and the run before it gives the permit
//! back or passes it as usual, the whole entry with it. What is set here is kept by the
//! holder's claim, not its key alone: a run of the same key claimed again is told no
//! one's permit. A move that failed leaves the told run under the giver's entry: it
//! moves it again as it gives the permit on. The gate's line still comes first: a run is
//! named next only while the line is empty (the pass's condition), so a run parked
//! meanwhile waits one turn more at most.
//!
//! The cost of a name that outlives its wait: an entry not removed by its holder (its
//! lease lapsed, its give-back failed) holds while the run it names lives, a run's life
//! at most, where it held until its holder's lease ran out.

use tokio::sync::watch;

use super::in_hand_waiters::{InHandWaiter, InHandWaiters};
use super::processor::Processor;
use crate::store::{Holder, Next, Pass};
use crate::telemetry::{Event, Transition};

/// The longest name of a next run written into a holder's entry (its key and claim, in
/// bytes). A gate holds up to [`crate::flow::MOST_AT_ONCE`] entries in one DynamoDB item
/// of at most 400 KB, each under its run's key of up to 1 KB: a next of any length could
/// double that; this adds 60 KB at most. A run of a longer key is passed as before.
const LONGEST_NEXT: usize = 200;

/// At a limit with a `fair` key, a next is named only at a gate whose permits this
/// worker holds for less than this (as the runs that gave one back held it, on average;
/// none named before one did). A run that joins the line while a next is named waits
/// that run's turn more: behind a backlog of one-second runs, a quiet tenant's run waited
/// a whole second more, 2.36 s where two job durations were the bound. Longer bodies hide
/// the pass's write (some 45 ms on LocalStack) well enough: the name is for short ones,
/// whose turn the write doubled. At a limit without one (one share: a limit per tenant's
/// key, a job's own), the run named takes no other share's turn, and is named whatever
/// its body (a run of a higher priority joining the line waits its turn too).
const NAMED_BELOW: std::time::Duration = std::time::Duration::from_millis(250);

impl InHandWaiters {
    /// Sets `waiter` as the run the permit of `item` held by the run `key` under `owner`
    /// goes to next. Told no permit comes, instead, when none is held here any more or
    /// its wait has run out (it waited through the write that named it).
    pub fn set_next(&self, item: &str, (key, owner): (&str, &str), waiter: InHandWaiter) {
        let mut gates = self.gates();
        match gates.get_mut(item).filter(|g| g.held > 0) {
            Some(gate) if tokio::time::Instant::now() < waiter.until => {
                gate.next
                    .insert((key.to_string(), owner.to_string()), waiter);
            }
            _ => {
                let _ = waiter.told.send(false);
            }
        }
    }

    /// The run set to come after the run `key` under `owner` at `item`, taken out, if it
    /// still waits. One set after an earlier claim of the same key is told no permit
    /// comes: that claim's entry is gone.
    pub fn take_next(&self, item: &str, (key, owner): (&str, &str)) -> Option<InHandWaiter> {
        let mut gates = self.gates();
        let gate = gates.get_mut(item)?;
        let stale: Vec<(String, String)> = gate
            .next
            .keys()
            .filter(|(k, o)| k == key && o != owner)
            .cloned()
            .collect();
        for old in stale {
            if let Some(w) = gate.next.remove(&old) {
                let _ = w.told.send(false);
            }
        }
        gate.next.remove(&(key.to_string(), owner.to_string()))
    }

    /// A run set to come after another run of `item`, taken out: when no other waits,
    /// the permit freed first goes to it rather than stand idle until the one it was set
    /// behind ends (that run's entry keeps naming it, a name that holds nothing more).
    /// Of several, the one the line's order puts first (priority, then the longest
    /// waiting), never the hash map's order: a simulated seed replays the same run.
    pub fn steal_next(&self, item: &str) -> Option<InHandWaiter> {
        let mut gates = self.gates();
        let gate = gates.get_mut(item)?;
        let key = gate
            .next
            .iter()
            .min_by_key(|(_, w)| (std::cmp::Reverse(w.priority), w.since_ms, w.id))?
            .0
            .clone();
        gate.next.remove(&key)
    }

    /// The run `key` under `owner` keeps no permit to pass (its body stopped, its outcome
    /// not written, or it was never told): the run set after it is told none comes, and
    /// what was kept for it goes.
    pub fn forget_next(&self, item: &str, (key, owner): (&str, &str)) {
        let waiter = {
            let mut gates = self.gates();
            let Some(gate) = gates.get_mut(item) else {
                return;
            };
            let id = (key.to_string(), owner.to_string());
            gate.moving.remove(key);
            gate.stranded.remove(&id);
            gate.next.remove(&id)
        };
        if let Some(waiter) = waiter {
            let _ = waiter.told.send(false);
        }
    }

    /// The write moving `item`'s entry to the run `key`'s name is in flight: resolves
    /// `moved` when it is answered.
    fn moving(&self, item: &str, key: &str, moved: watch::Receiver<bool>) {
        if let Some(gate) = self.gates().get_mut(item) {
            gate.moving.insert(key.to_string(), moved);
        }
    }

    /// The write moving `item`'s entry to the run `key`'s name, if one is in flight.
    fn moving_to(&self, item: &str, key: &str) -> Option<watch::Receiver<bool>> {
        self.gates().get_mut(item)?.moving.remove(key)
    }

    /// The move of `from`'s entry to the run told (`to`, its claim's entry) failed: the
    /// run holds the permit under `from`'s entry, to be moved again as it gives it on.
    fn strand(&self, item: &str, from: (&str, &str), to: (&str, &Holder)) {
        if let Some(gate) = self.gates().get_mut(item) {
            let id = (to.0.to_string(), to.1.owner.clone());
            let entry = (from.0.to_string(), from.1.to_string(), to.1.clone());
            gate.stranded.insert(id, entry);
        }
    }

    /// The entry the run `key` under `owner` holds `item`'s permit under, if its move to
    /// the run's name failed: taken out.
    fn stranded(&self, item: &str, (key, owner): (&str, &str)) -> Option<(String, String, Holder)> {
        let id = (key.to_string(), owner.to_string());
        self.gates().get_mut(item)?.stranded.remove(&id)
    }
}

impl Processor {
    /// Before the run `key` under `owner` gives the permit of `item` on: the write moving
    /// the entry to its name, if in flight, is waited for, and one that failed is made
    /// again (its release and its pass are conditioned on the entry being its own).
    pub(super) async fn entry_moved(&self, item: &str, limit: u32, (key, owner): (&str, &str)) {
        if let Some(mut moved) = self.inner.in_hand.moving_to(item, key) {
            let _ = moved.wait_for(|done| *done).await;
        }
        let Some((from, from_owner, entry)) = self.inner.in_hand.stranded(item, (key, owner))
        else {
            return;
        };
        let pass = Pass {
            item,
            limit,
            from: (&from, &from_owner),
            to: (key, &entry),
            promote: true,
        };
        // Refused or failed again: its give-back fails too, and the entry goes once both
        // runs' records say they no longer run.
        let _ = self.inner.store.pass_permit(pass).await;
    }

    /// The entry a run passed a permit holds it by: its own, naming the run that waits
    /// here first as its next, if one waits (taken out: set as next once the write lands,
    /// or put back).
    pub(super) fn entry_with_next(
        &self,
        item: &str,
        own: &Holder,
    ) -> (Holder, Option<InHandWaiter>) {
        let mut entry = own.clone();
        // Named only where permits are held briefly, or by runs of one share: see
        // [`NAMED_BELOW`].
        let in_hand = &self.inner.in_hand;
        let brief = in_hand.held_for(item).is_some_and(|h| h < NAMED_BELOW);
        let named = brief || in_hand.one_share(item);
        let mut next = named.then(|| in_hand.next(item)).flatten();
        // A long name is not written: every holder's entry lives in the gate's one item.
        if let Some(n) = next.take_if(|n| n.key.len() + n.holder.owner.len() > LONGEST_NEXT) {
            self.inner.in_hand.put_back(item, n);
        }
        if let Some(n) = &next {
            entry.then = Some(Next {
                key: n.key.clone(),
                owner: n.holder.owner.clone(),
            });
            entry.until_ms = entry.until_ms.max(n.holder.until_ms);
        }
        (entry, next)
    }

    /// Tells the run set next after the run `key` under `owner`
    /// ([`InHandWaiters::set_next`]) that the permit of `item` is its now, as `key`'s
    /// body ended, then moves the entry to its name: true when it was told (the permit is
    /// its, whatever the write found).
    pub(super) async fn pass_to_next(
        &self,
        item: &str,
        limit: u32,
        (key, owner): (&str, &str),
        t: &Transition<'_>,
    ) -> bool {
        let waiters = &self.inner.in_hand;
        let Some(next) = waiters.take_next(item, (key, owner)) else {
            return false;
        };
        let to = next.key.clone();
        let (done, moved) = watch::channel(false);
        waiters.moving(item, &to, moved);
        // Told before the write: its body starts now. A run no longer there to hear
        // (its walk ended) takes nothing: the permit is given back as usual.
        if next.told.send(true).is_err() {
            waiters.moving_to(item, &to);
            return false;
        }
        let (entry, after) = self.entry_with_next(item, &next.holder);
        let mut pass = Pass {
            item,
            limit,
            from: (key, owner),
            to: (&to, &entry),
            promote: true,
        };
        let mut answer = self.inner.store.pass_permit(pass).await;
        let line_formed = matches!(&answer, Ok(Err(seen)) if !seen.waiters.is_empty());
        if after.is_some() && line_formed {
            // The line formed since: the run moves in, naming no next of its own.
            pass.to = (&to, &next.holder);
            answer = self.inner.store.pass_permit(pass).await;
        }
        let to_id = (to.as_str(), next.holder.owner.as_str());
        let note = match answer {
            Ok(Ok(gate)) => {
                self.inner.looks.saw(item, &gate);
                match (after, gate.holders.get(&to).and_then(|h| h.then.as_ref())) {
                    (Some(after), Some(_)) => waiters.set_next(item, to_id, after),
                    (Some(after), None) => waiters.put_back(item, after),
                    (None, _) => {}
                }
                format!("passed on in hand to `{to}`, set next before")
            }
            answer => {
                if let Some(after) = after {
                    waiters.put_back(item, after);
                }
                // The entry stays the giver's, naming this run next: it holds while this
                // run's record is RUNNING, and is moved again as this run gives it on.
                waiters.strand(item, (key, owner), (&to, &next.holder));
                let why = match answer {
                    Err(e) => e.to_string(),
                    _ => "the entry had changed".to_string(),
                };
                format!("passed on in hand to `{to}`, set next before; its entry not moved: {why}")
            }
        };
        let _ = done.send(true);
        self.emit(t, Event::HandedOn { note: &note });
        true
    }
}
