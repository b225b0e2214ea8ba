//! The runs of this worker that wait, message in hand and claim kept, for a permit another
//! run of this worker holds ([`super::in_hand`]), by gate; and how many permits of each
//! gate this worker's runs hold. Kept apart from the `Processor` that uses it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::store::Holder;

/// One run waiting in hand.
#[derive(Debug)]
pub(super) struct InHandWaiter {
    /// Its run's key.
    pub key: String,
    /// The entry it would hold the permit by: its own claim's.
    pub holder: Holder,
    /// Its priority (higher first), then since when it waits (earlier first).
    pub priority: i32,
    pub since_ms: i64,
    /// Told whether the permit was passed to it.
    pub told: oneshot::Sender<bool>,
    /// Until when it waits: a waiter put back after it is told no permit comes.
    pub(super) until: tokio::time::Instant,
    pub(super) id: u64,
}

#[derive(Debug, Default)]
pub(super) struct GateInHand {
    pub held: usize,
    waiting: Vec<InHandWaiter>,
    /// When each share was last passed a permit here (a count of passes).
    served: HashMap<String, u64>,
    passes: u64,
    /// Runs of this worker watching the gate while none of its permits is held here
    /// ([`super::in_hand_watch`]), by fair share.
    pub watching: HashMap<String, usize>,
    /// When the next of them looks at the gate, and how many looks found it full since
    /// a permit was last held here.
    pub next_look: Option<tokio::time::Instant>,
    pub looks: u32,
    /// How many of them have a look booked (the others wait beside them).
    pub booked: usize,
    /// Whether the next run to hear that a permit is held here looks at the gate first
    /// ([`InHandWaiters::nudge`]).
    pub probe: bool,
    /// Wakes the watchers once a permit is held here: they wait for its pass instead.
    pub held_now: Arc<Notify>,
    /// When a run of this worker last asked the gate (took a permit or was refused).
    asked: Option<Instant>,
    /// By share: the turns given to runs sent away, in order.
    turns: HashMap<String, VecDeque<Instant>>,
    /// By share: the runs of this worker on their way into the gate, in the order they
    /// were let in by [`InHandWaiters::enter`] (from before their claim until they hold
    /// its permit, wait no more, or are sent away).
    entering: HashMap<String, Vec<u64>>,
    /// By the run holding the permit (its key and claim): the waiter its gate entry names
    /// next ([`super::in_hand_next`]), told when that run's body ends.
    pub(super) next: HashMap<(String, String), InHandWaiter>,
    /// By the key of the run told: the write moving the permit's entry to its name, while
    /// in flight ([`super::in_hand_next`]).
    pub(super) moving: HashMap<String, tokio::sync::watch::Receiver<bool>>,
    /// By the run told (its key and claim): the entry it runs under, not moved to its
    /// name (the move failed): its key, its claim, and the told run's own entry.
    pub(super) stranded: HashMap<(String, String), (String, String, Holder)>,
    /// Whether the gate's limit has no `fair` key: every run waiting for it is of one
    /// share, so one named next ([`super::in_hand_next`]) takes no other share's turn.
    pub(super) one_share: bool,
}

/// How long after this worker last asked a gate its runs arriving there still wait in hand
/// without asking ([`InHandWaiters::asks_again`]).
const ASKED_FOR: Duration = Duration::from_secs(1);

/// How long a permit is taken to be held before one given back here says: a second.
/// Runs sent away before any came back at once (at 0 s, three pollers sent 274 of a
/// backlog away in its first second and received them all again the next, each claimed
/// and given back while the gate's woken runs waited behind them in the queue).
const UNKNOWN_HOLD: Duration = Duration::from_secs(1);

/// The most gates whose holds are remembered ([`InHandWaiters::gave_back_after`]).
const MOST_HOLDS: usize = 1_024;

/// The most turns remembered by share: a backlog larger is sent away as far as turns go.
const MOST_TURNS: usize = 4_096;

/// How many shares' turns a gate keeps before it drops those whose turns have all come.
const MOST_TURN_SHARES: usize = 1_024;

/// The next turn of `share` at `gate`, `every` apart, after `ahead` runs and the turns
/// given before that have not come; how far away. A worker gives turns one hold of a
/// permit apart for each permit it holds (one at least): summed over the workers, the
/// turns come at the pace the gate frees its permits (spaced by the limit alone, each of
/// three pollers would give turns three times too close).
fn turn(gate: &mut GateInHand, share: &str, ahead: usize, every: Duration) -> Duration {
    let now = Instant::now();
    // The shares whose turns have all come are dropped once many are kept: a gate held
    // here all day by one tenant's runs meets a hundred thousand others' in a day.
    if gate.turns.len() >= MOST_TURN_SHARES {
        gate.turns
            .retain(|_, t| t.back().is_some_and(|last| *last > now));
    }
    let turns = gate.turns.entry(share.to_string()).or_default();
    while turns.front().is_some_and(|t| *t <= now) || turns.len() >= MOST_TURNS {
        turns.pop_front();
    }
    let ahead = (ahead + turns.len()) as u32;
    let delay = (every * ahead).min(crate::store::PARKED_FOR);
    // Turns are given in order: one given later never comes before one given earlier.
    let turn = turns
        .back()
        .map_or(now + delay, |last| (now + delay).max(*last));
    turns.push_back(turn);
    turn - now
}

impl GateInHand {
    /// Nothing held, waited for or watched here: the entry can go.
    /// Where the waiter that comes first is, as in the gate's line: the highest priority;
    /// among equals, the share served longest ago here, then the longest waiting.
    fn first_waiting(&self) -> Option<usize> {
        let served = |share: &str| self.served.get(share).copied().unwrap_or(0);
        (0..self.waiting.len()).min_by_key(|&i| {
            let w = &self.waiting[i];
            let turn = served(&w.holder.share);
            (std::cmp::Reverse(w.priority), turn, w.since_ms, w.id)
        })
    }

    pub fn idle(&self) -> bool {
        self.held == 0
            && self.watching.is_empty()
            && self.waiting.is_empty()
            && self.entering.is_empty()
            && self.next.is_empty()
    }
}

/// The worker's permits and waiters in hand, by gate item.
#[derive(Debug)]
pub(super) struct InHandWaiters {
    gates: Mutex<HashMap<String, GateInHand>>,
    /// How long each gate's permits are held here (a moving average of the runs that
    /// gave one back; kept while the gate idles): with the permits held here, the pace at
    /// which the gate frees permits, for runs of a crowded gate sent away to come again
    /// at their turn ([`InHandWaiters::crowded_turn`]).
    holds: Mutex<HashMap<String, Duration>>,
    next_id: Mutex<u64>,
    /// Set as the worker stops: no run waits in hand from then on.
    stopping: tokio::sync::watch::Sender<bool>,
    /// What the watchers' looks are aligned on ([`super::in_hand_watch`]): the first
    /// look's time.
    pub(super) epoch: std::sync::OnceLock<tokio::time::Instant>,
}

impl Default for InHandWaiters {
    fn default() -> Self {
        InHandWaiters {
            gates: Mutex::default(),
            holds: Mutex::default(),
            next_id: Mutex::default(),
            stopping: tokio::sync::watch::Sender::new(false),
            epoch: std::sync::OnceLock::new(),
        }
    }
}

/// A run registered as waiting: its id, to give up by, and what it will be told.
pub(super) struct Waiting {
    pub id: u64,
    pub told: oneshot::Receiver<bool>,
}

impl InHandWaiters {
    pub(super) fn gates(&self) -> std::sync::MutexGuard<'_, HashMap<String, GateInHand>> {
        self.gates.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A run of this worker took a permit of `item` (`fair`: whether its limit has a
    /// `fair` key).
    pub fn held(&self, item: &str, fair: bool) {
        let mut gates = self.gates();
        let gate = gates.entry(item.to_string()).or_default();
        gate.one_share = !fair;
        gate.held += 1;
        gate.looks = 0;
        if gate.held == 1 {
            gate.held_now.notify_waiters();
        }
    }

    /// How many runs wait in hand here for gates of one share (limits without a `fair`
    /// key): among a gate's waiting runs, watching it, or named next. What the poller
    /// receives meanwhile would most likely wait beside them. None while a run of a fair
    /// gate waits or is on its way in: the poller's receives are how it meets another
    /// share's run behind a backlog ([`super::crowded`]; gathered longer, the quiet
    /// tenant's run of `make bench-flow` was met 6.6 s after its send, where 1.7 s). The
    /// gates here are those this worker's runs hold, wait for or just left: a few,
    /// whatever the catalog's count of keys.
    pub fn waiting_for_one_share(&self) -> usize {
        let gates = self.gates();
        let waiting =
            |g: &GateInHand| g.waiting.len() + g.watching.values().sum::<usize>() + g.next.len();
        if gates
            .values()
            .any(|g| !g.one_share && (waiting(g) > 0 || !g.entering.is_empty()))
        {
            return 0;
        }
        gates.values().filter(|g| g.one_share).map(waiting).sum()
    }

    /// Whether every run waiting for `item` is of one share (its limit has no `fair`
    /// key), as the last run that took one of its permits here said.
    pub fn one_share(&self, item: &str) -> bool {
        self.gates().get(item).is_some_and(|g| g.one_share)
    }

    /// How many permits of `item` this worker's runs hold.
    pub fn held_here(&self, item: &str) -> usize {
        self.gates().get(item).map_or(0, |g| g.held)
    }

    /// Whether this worker's runs hold every permit of `item` (`limit`): a take would be
    /// refused, so a run waits in hand without asking.
    pub fn full_here(&self, item: &str, limit: u32) -> bool {
        self.gates()
            .get(item)
            .is_some_and(|g| g.held >= limit as usize)
    }

    /// The worker stops: every run waiting in hand is told no permit comes, and none
    /// waits from now on (they join their gates' lines, their messages hidden there,
    /// instead of holding the worker's stop for up to their wait).
    pub fn stop(&self) {
        self.stopping.send_replace(true);
        let mut gates = self.gates();
        for gate in gates.values_mut() {
            let next = gate.next.drain().map(|(_, w)| w);
            for waiter in gate.waiting.drain(..).chain(next) {
                let _ = waiter.told.send(false);
            }
        }
        gates.retain(|_, g| !g.idle());
    }

    /// The worker takes work again (a poll started after one stopped).
    pub fn start(&self) {
        self.stopping.send_replace(false);
    }

    /// Whether the worker stops (see [`InHandWaiters::stop`]).
    pub fn stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Resolves once the worker stops.
    pub async fn stopped(&self) {
        let mut stopping = self.stopping.subscribe();
        let _ = stopping.wait_for(|s| *s).await;
    }

    /// A run of this worker asked the gate `item` for a permit just now.
    pub fn asked(&self, item: &str) {
        if let Some(gate) = self.gates().get_mut(item) {
            gate.asked = Some(Instant::now());
        }
    }

    /// Whether a run of priority `priority` and fair share `share` arriving at `item` (of
    /// `limit` permits) waits in hand without asking the gate: this worker's runs hold
    /// every permit, or (of no priority above the ordinary) runs of its share wait here
    /// already and would be refused as they were, unless nobody here asked the gate for a
    /// while ([`InHandWaiters::asks_again`]): then it asks. It asks itself rather than
    /// have the first waiting run ask: a run taken out of the waiting ones for its look
    /// misses a pass made meanwhile, and with none left waiting the pass becomes a
    /// give-back, the permit idle again (adversary review).
    pub fn waits_without_asking(&self, item: &str, share: &str, limit: u32, priority: i32) -> bool {
        if self.full_here(item, limit) {
            return true;
        }
        priority <= 0 && self.waits_here(item, share) && !self.asks_again(item)
    }

    /// Whether a run arriving at `item`, where runs of this worker wait in hand, asks the
    /// gate: nobody here did for [`ASKED_FOR`]. They wait for this
    /// worker's passes, and a permit given back to the gate meanwhile (by another worker,
    /// or here while none waited) would stand idle: arriving, every run waits beside
    /// them without asking, and each is passed a permit before its own wait runs out
    /// (on LocalStack, one of a shared limit's four permits stood idle through the whole
    /// of `make bench-flow`'s 8 s case this way, every poller passing the other three).
    /// Counted as asked now: one run asks, at most once a [`ASKED_FOR`].
    fn asks_again(&self, item: &str) -> bool {
        let mut gates = self.gates();
        let Some(gate) = gates.get_mut(item) else {
            return false;
        };
        let now = Instant::now();
        if gate
            .asked
            .is_some_and(|at| now.duration_since(at) < ASKED_FOR)
        {
            return false;
        }
        gate.asked = Some(now);
        true
    }

    /// Whether runs of this worker of the fair share `share` wait in hand for a permit of
    /// `item` or watch it: a run of theirs would be refused as they were, and waits with
    /// them without asking (their looks and passes find a permit first).
    pub fn waits_here(&self, item: &str, share: &str) -> bool {
        self.gates().get(item).is_some_and(|g| {
            g.watching.contains_key(share)
                || g.waiting.iter().any(|w| w.holder.share == share)
                || g.next.values().any(|w| w.holder.share == share)
        })
    }

    /// Lets a run of the fair share `share` on its way into `item` (counted until
    /// [`InHandWaiters::entered`] with the id returned), unless it may be sent away
    /// (`may_crowd`) and as many of its share are on their way here already as this
    /// worker holds of the gate's permits (one at least, its `limit` at most): each permit
    /// given back here has a run to pass to, and the worker's other places go on
    /// receiving. Checked and counted at once: runs received together cannot all pass the
    /// bound before any is counted. A run sent away gets its turn instead: how many are
    /// on their way, and the turn's delay ([`turn`]).
    pub fn enter(
        &self,
        item: &str,
        share: &str,
        limit: u32,
        may_crowd: bool,
    ) -> Result<u64, (usize, Duration)> {
        let id = self.next_id();
        let hold = self.hold(item);
        let mut gates = self.gates();
        let gate = gates.entry(item.to_string()).or_default();
        let bound = gate.held.clamp(1, limit.max(1) as usize);
        let on_the_way = gate.entering.get(share).map_or(0, Vec::len);
        if may_crowd && on_the_way >= bound {
            return Err((
                on_the_way,
                turn(gate, share, on_the_way, hold / bound as u32),
            ));
        }
        gate.entering.entry(share.to_string()).or_default().push(id);
        Ok(id)
    }

    /// The run `id` [`InHandWaiters::enter`] let in is through: it holds the permit, waits
    /// no more, or was sent away.
    pub fn entered(&self, item: &str, share: &str, id: u64) {
        let mut gates = self.gates();
        let Some(gate) = gates.get_mut(item) else {
            return;
        };
        if let Some(ids) = gate.entering.get_mut(share) {
            ids.retain(|i| *i != id);
            if ids.is_empty() {
                gate.entering.remove(share);
            }
        }
        if gate.idle() {
            gates.remove(item);
        }
    }

    /// For the run `id`, let in already: whether those of its share let in before it
    /// crowd it as [`InHandWaiters::enter`] counts (the first ones let in go on, the
    /// later ones are sent away: never all of them), and if so its turn.
    pub fn crowded_turn(
        &self,
        item: &str,
        share: &str,
        id: u64,
        limit: u32,
    ) -> Option<(usize, Duration)> {
        let hold = self.hold(item);
        let mut gates = self.gates();
        let gate = gates.get_mut(item)?;
        let bound = gate.held.clamp(1, limit.max(1) as usize);
        let before = gate.entering.get(share)?.iter().position(|i| *i == id)?;
        if before < bound {
            return None;
        }
        Some((before, turn(gate, share, before, hold / bound as u32)))
    }

    /// How long a permit of `item` is held here, as the runs that gave one back held it
    /// (or its limit's other keys', [`InHandWaiters::held_for`]); [`UNKNOWN_HOLD`] before
    /// one did.
    fn hold(&self, item: &str) -> Duration {
        self.held_for(item).unwrap_or(UNKNOWN_HOLD)
    }

    /// How long a permit of `item` is held here, once a run here gave one back; before,
    /// how long the permits of its limit's other keys are (a gate per tenant is one
    /// job's: its runs hold the gate of a tenant this worker never held as long as the
    /// others').
    pub(super) fn held_for(&self, item: &str) -> Option<Duration> {
        let holds = self.holds();
        holds
            .get(item)
            .or_else(|| holds.get(crate::flow::limit_item(item)))
            .copied()
    }

    /// A run of this worker held a permit of `item` for `held` before giving it back.
    pub fn gave_back_after(&self, item: &str, held: Duration) {
        let mut holds = self.holds();
        if holds.len() >= MOST_HOLDS && !holds.contains_key(item) {
            holds.clear();
        }
        let limit = crate::flow::limit_item(item);
        let both = [item, limit];
        for item in &both[..if limit == item { 1 } else { 2 }] {
            let hold = holds.entry(item.to_string()).or_insert(held);
            *hold = (*hold * 3 + held) / 4;
        }
    }

    fn holds(&self) -> std::sync::MutexGuard<'_, HashMap<String, Duration>> {
        self.holds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A run of this worker gave a permit of `item` back (not passed on in hand). Once
    /// none is held here, the runs still waiting are taken out, to be told: no release
    /// here will come to them.
    pub fn released(&self, item: &str) -> Vec<InHandWaiter> {
        let mut gates = self.gates();
        let Some(g) = gates.get_mut(item) else {
            return Vec::new();
        };
        g.held = g.held.saturating_sub(1);
        if g.held > 0 {
            return Vec::new();
        }
        let mut waiting = std::mem::take(&mut g.waiting);
        waiting.extend(g.next.drain().map(|(_, w)| w));
        if g.idle() {
            gates.remove(item);
        }
        waiting
    }

    fn next_id(&self) -> u64 {
        let mut next = self.next_id.lock().unwrap_or_else(|p| p.into_inner());
        *next += 1;
        *next
    }

    /// Registers a run to wait for a permit of `item`, if a run of this worker holds one
    /// (none: no release here would come to it).
    pub fn wait(
        &self,
        item: &str,
        key: &str,
        holder: Holder,
        (priority, since_ms, most): (i32, i64, std::time::Duration),
    ) -> Option<Waiting> {
        let id = self.next_id();
        let mut gates = self.gates();
        if self.stopping() {
            return None;
        }
        let gate = gates.get_mut(item).filter(|g| g.held > 0)?;
        let (told, hears) = oneshot::channel();
        gate.waiting.push(InHandWaiter {
            key: key.to_string(),
            holder,
            priority,
            since_ms,
            told,
            until: tokio::time::Instant::now() + most,
            id,
        });
        Some(Waiting { id, told: hears })
    }

    /// The waiter of `item` that comes first, as in the gate's line: the highest
    /// priority; among equals, the share served longest ago here, then the longest
    /// waiting. Taken out: the releaser tells it whether the permit was passed.
    pub fn next(&self, item: &str) -> Option<InHandWaiter> {
        let mut gates = self.gates();
        let gate = gates.get_mut(item)?;
        let waiter = gate.waiting.remove(gate.first_waiting()?);
        gate.passes += 1;
        gate.served.insert(waiter.holder.share.clone(), gate.passes);
        Some(waiter)
    }

    /// Tells the run that would be passed `item`'s next permit here to look at the gate
    /// now instead: a run of this worker took a permit at a look, so the gate may have
    /// room for more (runs that watched a gate held elsewhere all waited for that one
    /// permit's passes, and the gate's other permits stood idle). Its look takes one, and
    /// nudges the next; or finds the gate full, and it waits for the pass as before.
    pub fn nudge(&self, item: &str) {
        let waiter = {
            let mut gates = self.gates();
            let Some(gate) = gates.get_mut(item) else {
                return;
            };
            gate.first_waiting().map(|i| gate.waiting.remove(i))
        };
        match waiter {
            Some(waiter) => {
                let _ = waiter.told.send(false);
            }
            // Its watchers have not heard yet: the first to hear looks.
            None => {
                if let Some(gate) = self.gates().get_mut(item) {
                    gate.probe = true;
                }
            }
        }
    }

    /// Puts a waiter [`InHandWaiters::next`] took back: the permit went to the gate's
    /// line, which comes first, and the run waits on for the next one here. Told no
    /// permit comes, instead, when none is held here any more.
    pub fn put_back(&self, item: &str, waiter: InHandWaiter) {
        let mut gates = self.gates();
        match gates.get_mut(item) {
            Some(gate) if gate.held > 0 && tokio::time::Instant::now() < waiter.until => {
                gate.waiting.push(waiter)
            }
            _ => {
                let _ = waiter.told.send(false);
            }
        }
    }

    /// A guard that gives the waiter `id` of `item` up if dropped armed: a wait dropped
    /// half-way leaves no waiter behind to be passed a permit.
    pub fn give_up_if_dropped<'a>(&'a self, item: &'a str, id: u64) -> GiveUpIfDropped<'a> {
        GiveUpIfDropped {
            waiters: self,
            item,
            id,
            armed: true,
        }
    }

    /// Takes the waiter `id` out, if it still waits: false when a releaser took it
    /// already (it is about to be told).
    pub fn give_up(&self, item: &str, id: u64) -> bool {
        let mut gates = self.gates();
        let Some(gate) = gates.get_mut(item) else {
            return false;
        };
        let before = gate.waiting.len() + gate.next.len();
        gate.waiting.retain(|w| w.id != id);
        gate.next.retain(|_, w| w.id != id);
        before != gate.waiting.len() + gate.next.len()
    }
}

/// See [`InHandWaiters::give_up_if_dropped`].
pub(super) struct GiveUpIfDropped<'a> {
    waiters: &'a InHandWaiters,
    item: &'a str,
    id: u64,
    armed: bool,
}

impl GiveUpIfDropped<'_> {
    /// The wait ended: nothing to give up.
    pub fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for GiveUpIfDropped<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.waiters.give_up(self.item, self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: std::time::Duration = std::time::Duration::from_secs(60);

    #[tokio::test(start_paused = true)]
    async fn a_waiter_put_back_past_its_wait_is_told_no_permit_comes() {
        let w = InHandWaiters::default();
        w.held("g", true);
        let short = std::time::Duration::from_secs(1);
        let mut waiting = w.wait("g", "a", holder(), (0, 1, short)).unwrap();
        let taken = w.next("g").unwrap();
        tokio::time::advance(std::time::Duration::from_secs(2)).await;
        w.put_back("g", taken);
        assert_eq!(waiting.told.try_recv(), Ok(false));
        assert!(w.next("g").is_none(), "not put back");
    }

    fn holder() -> Holder {
        of("s")
    }

    /// The runs the poller gathers its receives beside: those waiting for gates of one
    /// share, none while a run waits at, or is on its way into, a fair gate.
    #[tokio::test(start_paused = true)]
    async fn runs_waiting_for_gates_of_one_share_are_counted_unless_a_fair_gate_has_some() {
        let w = InHandWaiters::default();
        assert_eq!(w.waiting_for_one_share(), 0, "nobody waits");
        w.held("shared", false);
        assert_eq!(w.waiting_for_one_share(), 0, "held, nobody waits");
        let _one = w.wait("shared", "r1", holder(), (0, 1, LONG)).unwrap();
        let _two = w.wait("shared", "r2", holder(), (0, 2, LONG)).unwrap();
        assert_eq!(w.waiting_for_one_share(), 2);
        let entering = w.enter("fair", "a", 4, true).expect("none held: one");
        assert_eq!(
            w.waiting_for_one_share(),
            0,
            "a run on its way into a fair gate"
        );
        w.entered("fair", "a", entering);
        assert_eq!(w.waiting_for_one_share(), 2);
        w.held("fair", true);
        let _fair = w.wait("fair", "r3", of("a"), (0, 3, LONG)).unwrap();
        assert_eq!(w.waiting_for_one_share(), 0, "a run waits at a fair gate");
    }

    fn of(share: &str) -> Holder {
        Holder {
            owner: "w:1".into(),
            until_ms: 0,
            share: share.into(),
            then: None,
        }
    }

    #[test]
    fn a_gate_lets_on_their_way_as_many_runs_of_a_share_as_permits_held_here_within_its_limit() {
        let w = InHandWaiters::default();
        let first = w.enter("g", "a", 4, true).expect("none held: one");
        assert!(w.enter("g", "a", 4, true).is_err());
        let b = w.enter("g", "b", 4, true).expect("another share");
        let forced = w
            .enter("g", "a", 4, false)
            .expect("one that may not be sent away");
        assert_eq!(
            w.crowded_turn("g", "a", first, 4),
            None,
            "the first goes on"
        );
        assert!(
            w.crowded_turn("g", "a", forced, 4).is_some(),
            "one let in before it"
        );
        w.entered("g", "a", first);
        assert_eq!(w.crowded_turn("g", "a", forced, 4), None, "first now");
        w.entered("g", "a", forced);
        w.entered("g", "b", b);
        assert!(w.gates().get("g").is_none(), "nothing left: the entry goes");
        for _ in 0..6 {
            w.held("g", true);
        }
        for _ in 0..4 {
            assert!(w.enter("g", "a", 4, true).is_ok());
        }
        assert!(
            w.enter("g", "a", 4, true).is_err(),
            "six held: the limit bounds it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_gate_held_here_keeps_the_turns_of_only_as_many_shares_as_still_wait() {
        let w = InHandWaiters::default();
        w.held("g", true);
        for i in 0..5_000 {
            let share = format!("s{i}");
            let _on_its_way = w.enter("g", &share, 1, true).unwrap();
            assert!(
                w.enter("g", &share, 1, true).is_err(),
                "crowded: a turn given"
            );
            if i % 1_000 == 999 {
                tokio::time::advance(Duration::from_secs(60)).await;
            }
        }
        let kept = w.gates()["g"].turns.len();
        assert!(kept <= MOST_TURN_SHARES, "{kept} shares' turns kept");
    }

    #[test]
    fn runs_let_in_together_unchecked_are_never_all_sent_away() {
        let w = InHandWaiters::default();
        let ids: Vec<u64> = (0..5)
            .map(|_| w.enter("g", "a", 4, false).unwrap())
            .collect();
        let crowded: Vec<bool> = ids
            .iter()
            .map(|id| w.crowded_turn("g", "a", *id, 4).is_some())
            .collect();
        assert_eq!(
            crowded,
            [false, true, true, true, true],
            "none held: one goes on"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn runs_sent_away_from_a_crowded_gate_come_again_at_the_gates_pace_after_those_on_their_way()
     {
        let w = InHandWaiters::default();
        w.held("g", true);
        w.held("g", true);
        let ms = Duration::from_millis;
        assert!(w.enter("g", "a", 2, true).is_ok());
        assert!(w.enter("g", "a", 2, true).is_ok());
        // No hold seen yet: taken for a second, two permits held here: half a second
        // apart, after the two on their way.
        assert_eq!(w.enter("g", "a", 2, true), Err((2, ms(1_000))));
        tokio::time::advance(ms(1_001)).await;
        // Holds of a second seen.
        w.gave_back_after("g", ms(1_000));
        assert_eq!(w.enter("g", "a", 2, true), Err((2, ms(1_000))));
        assert_eq!(w.enter("g", "a", 2, true), Err((2, ms(1_500))));
        assert!(w.enter("g", "b", 2, true).is_ok(), "another share");
        // Holds of 200 ms seen: 100 ms apart now, the turns given still ahead.
        for _ in 0..20 {
            w.gave_back_after("g", ms(200));
        }
        assert_eq!(
            w.enter("g", "a", 2, true),
            Err((2, ms(1_500))),
            "not before"
        );
        tokio::time::advance(ms(1_200)).await;
        // One turn passed, two (at 1.5 s and 1.5 s) ahead, and two on their way: four
        // turns of 100 ms (the average of the holds is 202.5 ms after twenty of 200).
        let (_, delay) = w.enter("g", "a", 2, true).unwrap_err();
        assert!((ms(400)..ms(410)).contains(&delay), "{delay:?}");
        tokio::time::advance(Duration::from_secs(60)).await;
        let (_, delay) = w.enter("g", "a", 2, true).unwrap_err();
        assert!(
            (ms(200)..ms(205)).contains(&delay),
            "all turns passed: {delay:?}"
        );
    }

    #[test]
    fn among_equal_priorities_the_share_served_longest_ago_comes_first() {
        let w = InHandWaiters::default();
        w.held("g", true);
        let _waits: Vec<_> = ["a1", "a2", "a3"]
            .iter()
            .enumerate()
            .map(|(i, k)| w.wait("g", k, of("a"), (0, i as i64, LONG)).unwrap())
            .collect();
        let _quiet = w.wait("g", "b1", of("b"), (0, 10, LONG)).unwrap();
        let order: Vec<String> = std::iter::from_fn(|| w.next("g").map(|x| x.key)).collect();
        assert_eq!(order, ["a1", "b1", "a2", "a3"]);
    }

    #[test]
    fn a_wait_dropped_half_way_leaves_no_waiter_to_pass_to() {
        let w = InHandWaiters::default();
        w.held("g", true);
        let waiting = w.wait("g", "a", holder(), (0, 1, LONG)).unwrap();
        drop(w.give_up_if_dropped("g", waiting.id));
        assert!(w.next("g").is_none(), "given up");
        let kept = w.wait("g", "b", holder(), (0, 1, LONG)).unwrap();
        w.give_up_if_dropped("g", kept.id).disarm();
        assert_eq!(w.next("g").map(|x| x.key).as_deref(), Some("b"));
    }

    #[test]
    fn a_run_waits_in_hand_only_beside_a_permit_this_worker_holds() {
        let w = InHandWaiters::default();
        assert!(
            w.wait("g", "a", holder(), (0, 1, LONG)).is_none(),
            "nothing held here"
        );
        w.held("g", true);
        assert!(w.wait("g", "a", holder(), (0, 1, LONG)).is_some());
        w.held("g", true);
        assert!(w.released("g").is_empty(), "one still held");
        let left = w.released("g");
        assert_eq!(left.len(), 1, "none held: the waiter is let go");
        assert!(w.wait("g", "b", holder(), (0, 1, LONG)).is_none());
    }

    #[test]
    fn the_highest_priority_then_the_longest_waiting_comes_first_and_once() {
        let w = InHandWaiters::default();
        w.held("g", true);
        let _late = w.wait("g", "late", holder(), (0, 20, LONG)).unwrap();
        let _early = w.wait("g", "early", holder(), (0, 10, LONG)).unwrap();
        let _urgent = w.wait("g", "urgent", holder(), (5, 30, LONG)).unwrap();
        let order: Vec<String> = std::iter::from_fn(|| w.next("g").map(|x| x.key)).collect();
        assert_eq!(order, ["urgent", "early", "late"]);
    }

    #[test]
    fn a_waiter_taken_by_a_releaser_cannot_give_up_and_one_that_gave_up_is_not_taken() {
        let w = InHandWaiters::default();
        w.held("g", true);
        let a = w.wait("g", "a", holder(), (0, 1, LONG)).unwrap();
        let b = w.wait("g", "b", holder(), (0, 2, LONG)).unwrap();
        assert_eq!(w.next("g").map(|x| x.key).as_deref(), Some("a"));
        assert!(!w.give_up("g", a.id), "a releaser has it");
        assert!(w.give_up("g", b.id));
        assert!(w.next("g").is_none(), "b gave up");
    }
}
