//! Watching a full gate in hand: a poller's run that a full gate refused, while none of
//! that gate's permits is held by this worker and no run waits in the gate's line, keeps
//! its message and its claim and looks at the gate again a little later, instead of
//! joining the line.
//!
//! Why: a run that joins the line makes it non-empty, and a non-empty line stops every
//! pass in hand ([`super::in_hand`]) in every worker: the permits then go through the line,
//! a hidden message woken and received again behind the queue's backlog (three pollers
//! under a shared limit of 4 on a 50 ms job ran at 0.07 of the limit's pace, at 15
//! DynamoDB requests a run). A watching run leaves the line empty, so the workers whose
//! runs hold the permits keep passing them in hand, and the watcher takes one as soon as
//! one is free: at its look, or, once a run of this worker holds one, by its pass.
//!
//! The looks of one gate are shared by this worker's watchers: one look at a time, the
//! first 50 ms after the refusal, then twice as far apart up to 1 s while they find the
//! gate full (a look is one conditional write). A run that would come before the holders'
//! next runs in the line's order (of a positive priority, or of a fair share holding none
//! of the gate) does not watch: it joins the line, which hands it the next permit freed
//! anywhere. Neither does a run already in the line, nor one whose wait in hand ran out:
//! it joins the line as before. A look that takes a permit has the next run waiting here
//! look too ([`InHandWaiters::nudge`]), and so on while they find room: the watchers take
//! every permit freed, not one passed from run to run while the others stand idle. A run
//! whose look would come after its wait ends books none: beside runs of this worker that
//! look, it waits with them (for a permit one of them takes, then passed to it) until its
//! wait ends; alone, it joins the line at once.

use std::time::Duration;

use tokio::time::Instant;

use super::in_hand_waiters::{GateInHand, InHandWaiters};
use crate::store::Line;

/// The first look after a refusal, and the longest time between two looks.
const FIRST_LOOK: Duration = Duration::from_millis(50);
const LONGEST_LOOK: Duration = Duration::from_secs(1);
/// How many first looks' time two looks are apart at most.
const SLOWEST: u32 = 4;

/// What a watch came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Watch {
    /// A run of this worker holds a permit of the gate now: wait for its pass.
    Held,
    /// This run's look has come: ask the gate again.
    Look,
    /// Its wait in hand runs out before its look would come.
    Over,
}

/// Whether a run a full gate refused with `line` watches (see the module) rather than
/// joining the line: the line is empty, the run is not in it, holds no priority above
/// the ordinary, and its fair share holds a permit of the gate already.
pub(super) fn watches(line: &Line, priority: i32) -> bool {
    line.others == 0 && line.since_ms.is_none() && priority <= 0 && line.share_held > 0
}

/// Whether a run a full gate refused with `line` would come first in its line: the line
/// is empty and the run is of a positive priority or of a fair share holding none of the
/// gate. It joins the line at once, to be handed the next permit freed by any worker,
/// rather than wait in hand for one this worker frees (adversary review: a priority run
/// waited in hand beside a long body while another worker passed its permits on).
pub(super) fn comes_first(line: &Line, priority: i32) -> bool {
    line.others == 0 && line.since_ms.is_none() && (priority > 0 || line.share_held == 0)
}

/// The time between two looks after `looks` found the gate full, the first `first` after
/// the refusal: twice as far apart each time, up to [`SLOWEST`] times the first, a second
/// at most. A gate that frees a permit every few milliseconds is looked at every few tens
/// (a second apart, three pollers' watchers under a shared limit of two on 50 ms runs
/// left permits idle: 9.1 s for 300 runs where the limit allows 7.5, against 8.5 s).
fn look_every(first: Duration, looks: u32) -> Duration {
    let most = first.saturating_mul(SLOWEST).min(LONGEST_LOOK);
    first.saturating_mul(1u32 << looks.min(8)).min(most)
}

/// The time nearest `at` (half a step earlier at most) on the grid of steps `every`
/// counted from `epoch`: the looks of the gates this worker's runs watch fall on the same
/// ticks, and are read together ([`super::gate_looks`]); as often as unaligned, on
/// average. Steps of a gate's looks double from its first look, so the grids of two gates
/// of the same first look are nested: a gate still looking often meets the others on
/// every tick of theirs.
fn aligned(epoch: Instant, at: Instant, every: Duration) -> Instant {
    let every = every.as_nanos().max(1);
    let since = at.saturating_duration_since(epoch).as_nanos();
    let ticks = (since + every / 2) / every;
    epoch + Duration::from_nanos(u64::try_from(ticks * every).unwrap_or(u64::MAX))
}

impl InHandWaiters {
    /// When the first look at `item` comes after a refusal (see [`InHandWaiters::watch`]).
    fn first_look(&self, item: &str, limit: u32) -> Duration {
        self.held_for(item)
            .map_or(FIRST_LOOK, |hold| hold / limit.max(1))
            .clamp(FIRST_LOOK, LONGEST_LOOK)
    }

    /// Waits for this run's look at `item` (the run of fair share `share`), or for a run
    /// of this worker to hold one of its permits, whichever comes first, but not past
    /// `until`. `looked`: the looks this run made already; its next comes no sooner than
    /// that many looks' spacing says, even where the gate's schedule went with its last
    /// watcher (a lone watcher, found the gate full, watches again: it looked every 50 ms,
    /// 1.6 looks a run under a limit per tenant).
    ///
    /// The first look comes a share of the time a permit of the gate is held here (its
    /// hold over its `limit`: about when the gate frees its next permit), 50 ms at least
    /// and when no run here held one of its limit yet: a gate of one-second runs was
    /// looked at 50, 100, 200 and 400 ms after each refusal, and found full each time.
    pub async fn watch(
        &self,
        (item, share): (&str, &str),
        until: Instant,
        looked: u32,
        limit: u32,
    ) -> Watch {
        let first = self.first_look(item, limit);
        let held_now;
        // Its look, or None: it rides along with the worker's other watchers.
        let at;
        {
            let mut gates = self.gates();
            if self.stopping() {
                return Watch::Over;
            }
            let gate = gates.entry(item.to_string()).or_default();
            if gate.held > 0 {
                return gate.heard();
            }
            gate.looks = gate.looks.max(looked);
            let now = Instant::now();
            let epoch = *self.epoch.get_or_init(|| now);
            let next = gate
                .next_look
                .filter(|next| *next > now)
                .unwrap_or_else(|| {
                    aligned(
                        epoch,
                        now + look_every(first, gate.looks),
                        look_every(first, gate.looks),
                    )
                });
            at = (next <= until).then_some(next);
            if at.is_none() && gate.booked == 0 {
                // Its look would come after its wait ends, and no other run of this
                // worker looks: it joins the line now, and books no look nobody would
                // make.
                if gate.idle() {
                    gates.remove(item);
                }
                return Watch::Over;
            }
            // Its look would come after its wait ends while others of this worker look:
            // it books none and waits beside them, for a permit one of them takes (then
            // passed here) or its wait's end. Joining the line now would stop every
            // worker's passes (runs queued behind many watchers' looks all joined it, and
            // the gate ran through the line).
            if let Some(at) = at {
                gate.looks = gate.looks.saturating_add(1);
                let every = look_every(first, gate.looks);
                gate.next_look = Some(aligned(epoch, at + every, every));
                gate.booked += 1;
            }
            *gate.watching.entry(share.to_string()).or_default() += 1;
            held_now = gate.held_now.clone();
        }
        // Counted as watching until this returns, or is dropped half-way (its walk
        // aborted): a count left behind would keep the entry, and `waits_here`, forever.
        let _watching = Watching {
            waiters: self,
            item,
            share,
            booked: at.is_some(),
        };
        let notified = held_now.notified();
        tokio::pin!(notified);
        // Registered now: a permit held from here on wakes it.
        notified.as_mut().enable();
        if let Some(gate) = self.gates().get_mut(item).filter(|g| g.held > 0) {
            return gate.heard();
        }
        let watch = tokio::select! {
            _ = &mut notified => Watch::Held,
            () = self.stopped() => Watch::Over,
            _ = tokio::time::sleep_until(at.unwrap_or(until)) => match at {
                Some(_) => Watch::Look,
                None => Watch::Over,
            },
        };
        let mut gates = self.gates();
        match gates.get_mut(item) {
            Some(gate) if gate.held > 0 && watch != Watch::Over => gate.heard(),
            _ => watch,
        }
    }
}

impl GateInHand {
    /// What a watcher does on hearing a permit is held here: waits for its pass, or, the
    /// first to hear after a look took it ([`InHandWaiters::nudge`]), looks for another.
    fn heard(&mut self) -> Watch {
        match std::mem::take(&mut self.probe) {
            true => Watch::Look,
            false => Watch::Held,
        }
    }
}

/// A run counted as watching a gate: uncounted when dropped, and the gate's entry goes
/// once nothing else is there.
struct Watching<'a> {
    waiters: &'a InHandWaiters,
    item: &'a str,
    share: &'a str,
    /// Whether it has a look booked.
    booked: bool,
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        let mut gates = self.waiters.gates();
        let Some(gate) = gates.get_mut(self.item) else {
            return;
        };
        if self.booked {
            gate.booked = gate.booked.saturating_sub(1);
        }
        if let Some(n) = gate.watching.get_mut(self.share) {
            *n -= 1;
            if *n == 0 {
                gate.watching.remove(self.share);
            }
        }
        if gate.idle() {
            gates.remove(self.item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gate the tests watch, of share `s`.
    const GATE: (&str, &str) = ("g", "s");

    fn line(others: usize, share_held: usize) -> Line {
        Line {
            others,
            share_held,
            place: true,
            ..Line::default()
        }
    }

    #[test]
    fn only_a_run_that_would_not_come_first_in_an_empty_line_watches() {
        assert!(watches(&line(0, 2), 0));
        assert!(!watches(&line(1, 2), 0), "runs wait in the line");
        assert!(
            !watches(&line(0, 0), 0),
            "its share holds none: first by turn"
        );
        assert!(!watches(&line(0, 2), 1), "a priority: first by turn");
        let mut in_line = line(0, 2);
        in_line.since_ms = Some(5);
        assert!(!watches(&in_line, 0), "in the line already");
    }

    #[test]
    fn a_priority_or_a_share_holding_none_comes_first_in_an_empty_line() {
        assert!(comes_first(&line(0, 0), 0));
        assert!(comes_first(&line(0, 2), 1));
        assert!(!comes_first(&line(0, 2), 0), "its share holds the gate");
        assert!(
            !comes_first(&line(1, 0), 5),
            "others wait: it waits with them"
        );
    }

    #[test]
    fn looks_fall_on_the_workers_ticks_of_their_step() {
        let epoch = Instant::now();
        let ms = |n: u64| epoch + Duration::from_millis(n);
        let second = LONGEST_LOOK;
        assert_eq!(aligned(epoch, ms(1_499), second), ms(1_000));
        assert_eq!(aligned(epoch, ms(1_501), second), ms(2_000));
        assert_eq!(aligned(epoch, ms(3_000), second), ms(3_000));
        let closer = Duration::from_millis(200);
        assert_eq!(aligned(epoch, ms(1_237), closer), ms(1_200));
        assert_eq!(
            aligned(epoch, ms(1_300), closer),
            ms(1_400),
            "half-way: the later"
        );
    }

    #[test]
    fn looks_come_twice_as_far_apart_up_to_four_first_looks_or_a_second() {
        let ms: Vec<u128> = (0..4)
            .map(|n| look_every(FIRST_LOOK, n).as_millis())
            .collect();
        assert_eq!(ms, [50, 100, 200, 200], "four first looks' time at most");
        let half = Duration::from_millis(500);
        let ms: Vec<u128> = (0..4).map(|n| look_every(half, n).as_millis()).collect();
        assert_eq!(ms, [500, 1_000, 1_000, 1_000], "a second at most");
    }

    #[tokio::test(start_paused = true)]
    async fn a_worker_looks_at_a_gate_once_at_a_time_however_many_runs_watch_it() {
        let w = std::sync::Arc::new(InHandWaiters::default());
        let start = Instant::now();
        let far = start + Duration::from_secs(60);
        let mut looks = tokio::task::JoinSet::new();
        for _ in 0..3 {
            let w = w.clone();
            looks.spawn(async move { (w.watch(GATE, far, 0, 2).await, start.elapsed()) });
        }
        let mut at: Vec<u128> = looks
            .join_all()
            .await
            .into_iter()
            .map(|(watch, after)| {
                assert_eq!(watch, Watch::Look);
                after.as_millis()
            })
            .collect();
        at.sort();
        assert_eq!(at, [50, 200, 400], "one look at a time, further apart");
        assert!(w.gates().is_empty(), "nothing kept once none watches");
    }

    /// A lone watcher that found the gate full watches again: its next look keeps its
    /// spacing, though the gate's schedule went with it (it looked every 50 ms). A gate
    /// whose permits are held a second here is first looked at about half a second on at a
    /// limit of two (aligned: half a step earlier at most), and so is another key's gate of
    /// the same limit, never held here; another limit's, 50 ms on.
    #[tokio::test(start_paused = true)]
    async fn a_lone_watchers_looks_keep_their_spacing_and_start_at_the_gates_pace() {
        let w = InHandWaiters::default();
        let start = Instant::now();
        let far = start + Duration::from_secs(60);
        assert_eq!(w.watch(GATE, far, 3, 2).await, Watch::Look);
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(200),
            "its fourth look's step"
        );
        w.gave_back_after(".schedkit/concurrency/export/a", Duration::from_secs(1));
        for (item, from, to) in [
            (".schedkit/concurrency/export/a", 250, 500),
            (".schedkit/concurrency/export/b", 250, 500),
            (".schedkit/limit/other", 25, 75),
        ] {
            let at = Instant::now();
            assert_eq!(w.watch((item, "s"), far, 0, 2).await, Watch::Look);
            let first = at.elapsed().as_millis();
            assert!(
                (from..=to).contains(&first),
                "{item} first looked at {first} ms"
            );
        }
    }

    /// A run of share `s` watching gate `g` for up to a minute, 10 ms in.
    async fn watching() -> (
        std::sync::Arc<InHandWaiters>,
        tokio::task::JoinHandle<Watch>,
        Instant,
    ) {
        let w = std::sync::Arc::new(InHandWaiters::default());
        let far = Instant::now() + Duration::from_secs(60);
        let watcher = {
            let w = w.clone();
            tokio::spawn(async move { w.watch(GATE, far, 0, 2).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        (w, watcher, far)
    }

    #[tokio::test(start_paused = true)]
    async fn a_watcher_hears_at_once_that_a_run_of_its_worker_holds_the_gate() {
        let (w, watcher, far) = watching().await;
        w.held("g", true);
        assert_eq!(watcher.await.unwrap(), Watch::Held);
        assert_eq!(w.watch(GATE, far, 0, 2).await, Watch::Held, "held: no look");
    }

    /// Adversary review: a watch dropped half-way (its walk aborted) left its count, so the
    /// gate's entry stayed and its share's runs waited without asking, for good.
    #[tokio::test(start_paused = true)]
    async fn a_watch_dropped_half_way_is_no_longer_counted() {
        let (w, watcher, _) = watching().await;
        assert!(w.waits_here("g", "s"));
        watcher.abort();
        let _ = watcher.await;
        assert!(!w.waits_here("g", "s"));
        assert!(w.gates().is_empty(), "nothing kept");
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_whose_look_would_come_after_its_wait_ends_joins_the_line_at_once() {
        let w = InHandWaiters::default();
        let start = Instant::now();
        let soon = start + Duration::from_millis(20);
        assert_eq!(w.watch(GATE, soon, 0, 2).await, Watch::Over);
        assert_eq!(Instant::now(), start, "at once");
        assert!(w.gates().is_empty(), "no look booked, nothing kept");
    }

    /// A run whose look would come after its wait ends, while another run of the worker
    /// has a look booked, waits beside it rather than joining the line at once: a park
    /// stops every worker's passes (with looks up to 4 s apart, ten watchers' bookings
    /// reached past their waits within half a second, they all joined the line, and three
    /// pollers under a shared limit of 4 ran at 0.11 of its pace). It hears of a permit
    /// held here as the others do, and joins the line at its wait's end.
    #[tokio::test(start_paused = true)]
    async fn a_run_whose_look_would_come_past_its_wait_waits_beside_the_workers_looking_runs() {
        let w = std::sync::Arc::new(InHandWaiters::default());
        let start = Instant::now();
        let far = start + Duration::from_secs(60);
        let looking = {
            let w = w.clone();
            tokio::spawn(async move { w.watch(GATE, far, 0, 2).await })
        };
        tokio::time::sleep(Duration::from_millis(1)).await;
        // Its look would come at 150 ms, after its wait ends at 120 ms.
        let beside = {
            let w = w.clone();
            tokio::spawn(async move {
                w.watch(GATE, start + Duration::from_millis(120), 0, 2)
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!beside.is_finished(), "it waits beside the looking run");
        w.held("g", true);
        assert_eq!(beside.await.unwrap(), Watch::Held);
        assert_eq!(looking.await.unwrap(), Watch::Held);
        // Beside a booked look again, it joins the line at its wait's end, not before.
        let w = std::sync::Arc::new(InHandWaiters::default());
        let start = Instant::now();
        let looking = {
            let w = w.clone();
            tokio::spawn(async move { w.watch(GATE, start + Duration::from_secs(60), 0, 2).await })
        };
        tokio::time::sleep(Duration::from_millis(1)).await;
        let until = start + Duration::from_millis(120);
        assert_eq!(w.watch(GATE, until, 0, 2).await, Watch::Over);
        assert_eq!(Instant::now(), until, "at its wait's end");
        assert_eq!(looking.await.unwrap(), Watch::Look);
    }

    /// Adversary review: watchers that booked looks past their wait and left made every
    /// later watcher's look come later and later, until none looked at all.
    #[tokio::test(start_paused = true)]
    async fn many_watchers_with_short_waits_never_push_the_looks_out_of_reach() {
        let w = std::sync::Arc::new(InHandWaiters::default());
        let start = Instant::now();
        let short = start + Duration::from_secs(3);
        let mut brief = tokio::task::JoinSet::new();
        for _ in 0..100 {
            let w = w.clone();
            brief.spawn(async move { w.watch(GATE, short, 0, 2).await });
        }
        brief.join_all().await;
        tokio::time::sleep_until(short).await;
        let far = Instant::now() + Duration::from_secs(60);
        assert_eq!(w.watch(GATE, far, 0, 2).await, Watch::Look);
        let waited = Instant::now() - short;
        assert!(waited <= Duration::from_secs(1), "looked after {waited:?}");
    }
}
