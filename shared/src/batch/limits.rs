//! Step 5, admission, second half: the run's flow-control limits (see [`crate::flow`]).
//! After its claim decided the run will run and its overlap slot let it in, the run takes a
//! permit of each of its gates, in order; a gate that refuses (full, or its rate allows no
//! start yet) gives back the permits taken and the claim (no attempt spent). At a full gate
//! the run waits in the gate's line, to be handed a permit ([`super::line`]); at a rate, or
//! with the line full, its message comes back later with a delay and jitter, carrying since
//! when it has waited. A run that has waited longer than its job's `max_wait_seconds` is
//! FAILED unrun and dead-lettered `limit-wait`. The permits are given back, and handed on,
//! as the body ends, beside writing its outcome (a body stopped: once its outcome is
//! written; [`Processor::release_permits`]); a worker that dies holding them leaves entries
//! that the next taker drops once the run's record shows its lease ran out.

use std::time::Duration;

use super::ask_turns::AskTurn;
use super::claim::Claim;
use super::crowded::{Crowded, Entering, crowded_why};
use super::gate_looks::Seen;
use super::in_hand::{InHandWait, Waited};
use super::in_hand_watch::{comes_first, watches};
use super::outcome::Outcome;
use super::pipeline::{MessageCtx, Step};
use super::processor::Processor;
use super::route::Routed;
use crate::dead_letter::DeadLetterReason;
use crate::envelope::Envelope;
use crate::flow::Gate;
use crate::store::{ExecutionRecord, Line, PARKED_FOR, Permit, PermitRequest};
use crate::telemetry::{Event, Transition};

/// The longest a run waits between two looks at a full gate: short enough that a permit a
/// dead worker left is taken again within a few seconds of its lease running out (the
/// issue's bound is the lease and 5 s), long enough that hundreds of waiting runs do not
/// crowd the table. Each look costs the claim, the take, the give-back and the copy sent
/// again.
const LONGEST_LOOK: Duration = Duration::from_secs(3);

/// Why a gate held a claimed run back: its store's refusal, or, unasked, its fair gate
/// crowded here by the runs of its share let on their way before it ([`super::crowded`]).
enum Refusal {
    Gate(Permit),
    Crowded(Crowded),
}

/// The longest wait for a rate's next start a poller makes in place, in ms.
const IN_PLACE_MS: i64 = 1_000;

/// When a run refused by a full gate looks again: after 1 s at its first refusal, then
/// anywhere from 1 s to [`LONGEST_LOOK`] (SQS delays are whole seconds), so that waiting
/// runs spread over the time a permit may come free.
fn full_gate_look(waits: u32, jitter: Duration) -> Duration {
    let span = LONGEST_LOOK - Duration::from_secs(1);
    match waits {
        0 => Duration::from_secs(1),
        _ => Duration::from_secs(1) + jitter.min(span),
    }
}

/// When a run a full gate refused, and that did not park, looks again.
fn full_look(line: &Line, waits: u32, jitter: Duration, left: Duration) -> Duration {
    match line.place {
        true => full_gate_look(waits, jitter),
        false => no_place_look(waits, jitter, left),
    }
}

/// Why a run a full gate refused looks again on a timer, as its log line says it.
fn full_why(gate: &Gate, holders: usize, line: &Line) -> String {
    let limit = gate.concurrency.unwrap_or_default();
    let place = if line.place { "" } else { ", no place for it" };
    format!(
        "`{}` is full: {holders} of {limit} held, {} waiting in line{place}",
        gate.limit, line.waiting
    )
}

/// Since when (epoch ms) the claimed run's attempt has waited for its limits, as its
/// message's copy says (a run sent back to look again) or its record (every refusal gives
/// the claim back with it: the one memory that outlives a run put out of a gate's line, or
/// a hidden message that came back by itself); None before its first refusal.
pub(super) fn known_since(ctx: &MessageCtx<'_>, claim: &Claim) -> Option<i64> {
    let attempt = claim.record.attempt;
    let recorded = claim.before.as_ref().and_then(|b| b.waiting_since(attempt));
    [ctx.delivery.waiting_since(attempt), recorded]
        .into_iter()
        .flatten()
        .min()
}

/// The run's priority: its message's own (a `fire --priority`), else its job's.
pub(super) fn priority_of(envelope: &Envelope, job: &Routed<'_>) -> i32 {
    let flow = &job.registered.policy.flow;
    envelope.priority.unwrap_or(flow.priority)
}

/// When a run that found no place in a full gate's line looks again: 2 s at its first
/// refusal, then twice as long each time, plus jitter, up to [`PARKED_FOR`] (a parked
/// run's own bound, which a chain step's heartbeat allows for), never past its `max_wait`
/// (`left`). It cannot start before the line's
/// runs, which all come before it, and the line's first run watches for a dead holder;
/// a backlog beyond the line that looked every few seconds crowded the queue in front of a
/// quiet tenant's run (`make bench-flow`'s backlog rows).
pub(super) fn no_place_look(waits: u32, jitter: Duration, left: Duration) -> Duration {
    let doubled = Duration::from_secs(2u64 << waits.min(5));
    let look = (doubled + jitter.min(LONGEST_LOOK)).min(PARKED_FOR);
    look.min(left).max(Duration::from_secs(1))
}

/// When a run refused by a gate's rate looks again: at the first whole second (SQS delays
/// are whole seconds) at or after the next start, plus a whole number of seconds of jitter
/// up to one spacing. Rounding the jittered time up instead sent almost every waiter past
/// the start it waited for (measured: one start in five lost at 30/minute); whole seconds
/// from the first one after it leave the next start a waiter within its first second.
fn rate_look(next_start_ms: i64, now_ms: i64, jitter: Duration) -> Duration {
    let until = (next_start_ms - now_ms).max(0) as u64;
    Duration::from_secs(until.div_ceil(1_000) + jitter.as_secs())
}

/// What the run `key` under its claim `owner` asks of `gate`, waiting since `since_ms`.
fn request_of<'a>(
    gate: &'a Gate,
    (key, owner): (&'a str, &'a str),
    (priority, since_ms): (i32, Option<i64>),
    now: chrono::DateTime<chrono::Utc>,
    (lease, skew): (Duration, Duration),
) -> PermitRequest<'a> {
    PermitRequest {
        item: &gate.item,
        key,
        owner,
        concurrency: gate.concurrency,
        spacing: gate.spacing,
        share: &gate.share,
        priority,
        since_ms,
        now,
        lease,
        skew,
    }
}

/// Whether the gate refused the run a permit (full, or its rate's next start to come):
/// not a permit taken, nor a store that did not answer.
fn refused(answer: &Result<Permit, crate::store::StoreError>) -> bool {
    matches!(answer, Ok(Permit::Full { .. } | Permit::TooSoon { .. }))
}

/// A rate's start taken with a late answer is not used: the rate's next start was set from
/// the time the request was sent (DynamoDB has no clock of its own to offer), so a run that
/// started long after it could start closer to the next one than the rate allows. Past the
/// clock-skew bound the start is given up (the rate runs below its maximum, never above) and
/// the run looks again at its next start.
fn late_start(
    gate: &Gate,
    sent: chrono::DateTime<chrono::Utc>,
    answered: chrono::DateTime<chrono::Utc>,
    skew: Duration,
) -> Option<Permit> {
    let spacing = gate.spacing?;
    let late = (answered - sent).to_std().unwrap_or_default() > skew;
    late.then(|| Permit::TooSoon {
        next_start_ms: sent.timestamp_millis() + spacing.as_millis() as i64,
    })
}

/// A permit passed in hand, as a take that waited since `since_ms` (its first refusal),
/// else since its claim: the wait counts in the run's `LimitWait`.
fn passed_since(since_ms: Option<i64>, claim: &Claim) -> Permit {
    Permit::Handed {
        since_ms: since_ms.unwrap_or(claim.request.now.timestamp_millis()),
    }
}

/// The permits an admitted run holds until its outcome is written.
#[must_use = "permits are given back once the outcome is written (`Processor::release_permits`)"]
pub(super) struct Permits {
    /// The claim that took them.
    owner: String,
    /// The gates' item keys, with their concurrency (to hand a freed permit on) and the
    /// run's fair share of each.
    items: Vec<(String, u32, String)>,
    /// Since when the first is held: how long the run held them, for the pace at which
    /// its gates free permits ([`super::crowded`]). None for permits given back unrun (a
    /// later gate refused the run): a hold of a few milliseconds is not a body's, and
    /// counted, it brought the turns down to their one-second floor.
    since: Option<tokio::time::Instant>,
}

impl Permits {
    /// Holds a permit of `gate` (once: taken again after a wait, it is the same entry),
    /// counted as this worker's; a gate with only a rate holds nothing to give back.
    fn hold(&mut self, processor: &Processor, gate: &Gate) {
        if self.add(gate) {
            processor.inner.in_hand.held(&gate.item, gate.fair);
        }
    }

    /// Adds a permit of `gate` (counted already: one passed in hand); whether it is new.
    fn add(&mut self, gate: &Gate) -> bool {
        match gate.concurrency {
            Some(limit) if self.items.last().map(|(i, ..)| i) != Some(&gate.item) => {
                let share = gate.share.clone();
                self.items.push((gate.item.clone(), limit, share));
                self.since.get_or_insert_with(tokio::time::Instant::now);
                true
            }
            _ => false,
        }
    }

    /// The gates' item keys.
    pub(super) fn items(&self) -> impl Iterator<Item = &str> {
        self.items.iter().map(|(i, ..)| i.as_str())
    }

    /// The claim that took them.
    pub(super) fn owner(&self) -> &str {
        &self.owner
    }
}

impl Processor {
    /// The gates a run must pass, from its payload; a payload that cannot name its gate
    /// (a field the job's concurrency key reads is missing) is dead-lettered as poison,
    /// before anything is claimed.
    pub(super) async fn gates(
        &self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        job: &Routed<'_>,
        t: &Transition<'_>,
    ) -> Step<Vec<Gate>> {
        let flow = &job.registered.policy.flow;
        if !flow.any() {
            return Ok(Vec::new());
        }
        match flow.gates(t.job, envelope.payload.as_ref()) {
            Ok(gates) => Ok(gates),
            Err(e) => {
                let error = format!("the job's concurrency key cannot be read: {e}");
                let reason = DeadLetterReason::Poison;
                Err(self
                    .reject(ctx, reason, &error, Some(t.job), Some(t.key))
                    .await)
            }
        }
    }

    /// Takes a permit of each gate for the claimed run, or ends the walk: the run waits
    /// (or, past its job's `max_wait_seconds`, is dead-lettered `limit-wait`).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn enter_limits(
        &self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        job: &Routed<'_>,
        claim: &Claim,
        gates: &[Gate],
        entering: &Entering,
        t: &Transition<'_>,
    ) -> Step<Permits> {
        let (owner, items) = (claim.request.owner.clone(), Vec::new());
        let mut taken = Permits {
            owner,
            items,
            since: None,
        };
        if gates.is_empty() {
            return Ok(taken);
        }
        let clock = self.inner.config.clock;
        let mut handed_since: Option<i64> = None;
        let (priority, since_ms) = (priority_of(envelope, job), known_since(ctx, claim));
        // A first delivery hidden once from a crowded gate and back (never claimed
        // before, and received before) is sent away again if crowded still, its claim
        // given back: counted on its way unchecked, as a woken waiter is (whose permit
        // waits for it). Looked at before any take: a rate's start taken and then sent
        // away would be spent for nothing.
        let hidden_back = claim.before.is_none() && ctx.delivery.receive_count > 1;
        let crowded = gates
            .iter()
            .filter(|_| hidden_back)
            .find_map(|g| self.crowded(g, priority, entering).map(|c| (g, c)));
        if let Some((gate, crowded)) = crowded {
            let refused = Refusal::Crowded(crowded);
            let held = self.held_back(ctx, envelope, job, claim, gate, refused, t);
            return Err(held.await);
        }
        for gate in gates {
            let answer = self
                .take_gate(ctx, job, claim, gate, &mut taken, t, (priority, since_ms))
                .await;
            match answer {
                Ok(Permit::Taken) => {}
                Ok(Permit::Handed { since_ms }) => {
                    handed_since = Some(handed_since.map_or(since_ms, |s: i64| s.min(since_ms)));
                }
                Ok(refused) => {
                    // Held for no body: not a hold the gate's pace is measured by.
                    taken.since = None;
                    self.release_permits(taken, t).await;
                    let refused = Refusal::Gate(refused);
                    let held = self.held_back(ctx, envelope, job, claim, gate, refused, t);
                    return Err(held.await);
                }
                Err(e) => {
                    // Its answer may be lost with the take applied: given back too (a
                    // release names the claim, so it never frees another's).
                    taken.hold(self, gate);
                    taken.since = None;
                    self.release_permits(taken, t).await;
                    return Err(self.give_back_after(ctx, claim, e, t).await);
                }
            }
        }
        let since = [
            ctx.delivery.waiting_since(claim.record.attempt),
            handed_since,
        ];
        if let Some(since) = since.into_iter().flatten().min() {
            let waited_ms = (clock.now().timestamp_millis() - since).max(0) as f64;
            self.emit(t, Event::LimitsEntered { waited_ms });
        }
        Ok(taken)
    }

    /// Takes a permit of `gate` for the claimed run: a start of its rate less than a second
    /// away is waited for in place, once, outside Lambda (SQS's whole-second delays would
    /// miss it, and a Lambda invocation hands its waits back at once); a full gate is
    /// waited for in hand, for the pass of a run of this worker that holds it
    /// ([`super::in_hand`]) or, none held here, watched ([`super::in_hand_watch`]), until
    /// the run's wait in hand ends; a run first by turn in the gate's line joins it at
    /// once. A permit held is added to `taken` (taken again after a wait, it is the same
    /// entry).
    #[allow(clippy::too_many_arguments)]
    async fn take_gate(
        &self,
        ctx: &MessageCtx<'_>,
        job: &Routed<'_>,
        claim: &Claim,
        gate: &Gate,
        taken: &mut Permits,
        t: &Transition<'_>,
        (priority, since_ms): (i32, Option<i64>),
    ) -> Result<Permit, crate::store::StoreError> {
        let (clock, skew) = (self.inner.config.clock, self.inner.config.clock_skew);
        let lease = job.registered.policy.lease;
        // A run holding another gate's permit never waits in hand: two runs each holding
        // what the other waits for would hold both idle.
        let may_wait = taken.items.is_empty();
        let (mut waited_here, mut waited_in_hand) = (false, false);
        let mut wait_in_hand = InHandWait::default();
        let waiting = (priority, since_ms, job);
        // This worker's runs hold every permit, or runs of its share wait here already:
        // waited for in hand at once, no take asked. Not a run that waited before (woken
        // from the line, or back from a timer): it may hold a permit handed on to it, or
        // come first in the line, and asks the gate.
        let in_hand = &self.inner.in_hand;
        let arriving = may_wait && since_ms.is_none();
        // Runs arriving together ask in turn ([`super::ask_turns`]), or wait in hand as
        // above once what a turn's answer showed says so.
        let mut turn = self.ask_turn(gate, arriving).await;
        if let Some(limit) = gate.concurrency
            && arriving
            && in_hand.waits_without_asking(&gate.item, &gate.share, limit, priority)
        {
            drop(turn.take());
            let wait = (priority <= 0, &mut wait_in_hand);
            let waited = self.in_hand_for(ctx, claim, gate, &taken.owner, t, waiting, wait);
            if let Waited::Passed = waited.await {
                taken.add(gate);
                return Ok(passed_since(since_ms, claim));
            }
            waited_in_hand = true;
        }
        // Whether the next ask must be the gate's own answer, not a read a moment ago.
        let mut ask_now = false;
        loop {
            let seen = self.look_at(gate, waited_in_hand, since_ms, ask_now).await;
            let earlier = matches!(seen, Some(Seen::Earlier(_)));
            let now = clock.now();
            let run = (t.key, taken.owner.as_str());
            let req = request_of(gate, run, (priority, since_ms), now, (lease, skew));
            let mut answer = self.ask_gate(req, seen).await;
            if matches!(answer, Ok(Permit::Taken | Permit::Handed { .. })) {
                // A gate with only a rate holds nothing to give back.
                taken.hold(self, gate);
                answer = late_start(gate, now, clock.now(), skew).map_or(answer, Ok);
                // Taken at a watcher's look: its wait counts as a handed permit's, and
                // the gate may have room for the next run waiting here.
                if waited_in_hand && matches!(answer, Ok(Permit::Taken)) {
                    in_hand.nudge(&gate.item);
                    return Ok(passed_since(since_ms, claim));
                }
            }
            // Answered (and a permit taken counted): the next run arriving decides from it.
            drop(turn.take());
            let leaves = match (&answer, ctx.deadline) {
                (Ok(Permit::TooSoon { next_start_ms }), None) if !waited_here && !earlier => {
                    waited_here = true;
                    !self.waited_in_place(*next_start_ms).await
                }
                (Ok(Permit::Full { line, .. }), _) if comes_first(line, priority) => true,
                (Ok(Permit::Full { line, .. }), _) if may_wait => {
                    let wait = (watches(line, priority), &mut wait_in_hand);
                    match self
                        .in_hand_for(ctx, claim, gate, &taken.owner, t, waiting, wait)
                        .await
                    {
                        Waited::Over => true,
                        Waited::Passed => {
                            taken.add(gate);
                            return Ok(passed_since(since_ms, claim));
                        }
                        Waited::Look => {
                            waited_in_hand = true;
                            false
                        }
                    }
                }
                _ => true,
            };
            // A refusal decided from a read a moment ago is not acted on (a park, a copy
            // sent back, a wait for a rate's start): the gate itself is asked first, as
            // the read may not show a permit freed since (adversary review).
            ask_now = leaves && earlier && refused(&answer);
            if leaves && !ask_now {
                return answer;
            }
        }
    }

    /// A turn for a run `arriving` at `gate` to ask it: as many takes in flight as the
    /// gate may have permits free. Seen less than a second ago, those the view shows free,
    /// or as many as there are runs to take (a gate seen full, or with runs in its line,
    /// is decided from the view: a run that then waits in hand or watches makes no
    /// write); not seen, the limit less the permits this worker's runs hold (none when
    /// they hold them all: the run waits in hand for their passes, unasked). None for a
    /// run not arriving (it waited before: it may hold a permit handed on to it, or come
    /// first in the line; or it holds another gate's permit) or at a gate that counts no
    /// runs.
    async fn ask_turn(&self, gate: &crate::flow::Gate, arriving: bool) -> Option<AskTurn> {
        let limit = gate.concurrency.filter(|_| arriving)? as usize;
        let may_ask = || match self.inner.looks.fresh_counts(&gate.item) {
            Some((holders, waiters)) if holders >= limit || waiters > 0 => usize::MAX,
            Some((holders, _)) => limit - holders,
            None => limit.saturating_sub(self.inner.in_hand.held_here(&gate.item)),
        };
        Some(self.inner.asks.turn(&gate.item, may_ask).await)
    }

    /// Waits where it is for a rate's next start (`next_start_ms`) less than
    /// [`IN_PLACE_MS`] away; whether it did (one further away is waited for on a timer).
    async fn waited_in_place(&self, next_start_ms: i64) -> bool {
        let wait = next_start_ms - self.inner.config.clock.now().timestamp_millis();
        if !(0..=IN_PLACE_MS).contains(&wait) {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(wait as u64 + 5)).await;
        true
    }

    /// What a run decides to take a permit of `gate` from, besides its write's answer. A
    /// watcher's look (`looks`) reads the gate with this worker's other looks, and writes
    /// only when the read shows a permit to take; a run that never waited, arriving at a
    /// gate read less than a second ago, decides from that read (not a woken run: a read
    /// before its hand-on would not show the permit reserved for it). `ask_now`: a
    /// refusal decided from an earlier read is to be acted on; the gate is asked.
    async fn look_at(
        &self,
        gate: &Gate,
        looks: bool,
        since_ms: Option<i64>,
        ask_now: bool,
    ) -> Option<Seen> {
        let item = &gate.item;
        match (looks, since_ms) {
            _ if ask_now => None,
            (true, _) => self
                .inner
                .looks
                .look(&self.inner.store, item)
                .await
                .map(Seen::Now),
            (false, None) => self.inner.looks.fresh(item).map(Seen::Earlier),
            (false, Some(_)) => None,
        }
    }

    /// Asks the gate for a permit, from what was `seen` of it: a take that writes only
    /// when that shows one to take; without it, a take. Counted as this worker's ask of
    /// the gate unless decided from an earlier read, with no request; a permit taken is
    /// added to what was read of the gate.
    async fn ask_gate(
        &self,
        req: PermitRequest<'_>,
        seen: Option<Seen>,
    ) -> Result<Permit, crate::store::StoreError> {
        let asked_now = !matches!(seen, Some(Seen::Earlier(_)));
        let sent = tokio::time::Instant::now();
        let item = req.item;
        let answer = match seen {
            Some(Seen::Now(seen) | Seen::Earlier(seen)) => {
                self.inner.store.take_permit_seen(req, seen).await
            }
            None => self.inner.store.take_permit(req).await,
        };
        if asked_now {
            self.inner.in_hand.asked(item);
        }
        match &answer {
            Ok(Permit::Taken | Permit::Handed { .. }) => {
                let entry = crate::store::entry_of(&req);
                self.inner.looks.took(item, req.key, entry);
            }
            // A refusal's answer is a view of the gate as good as a read, as of when the
            // take was sent.
            Ok(Permit::Full {
                answered: Some(gate),
                ..
            }) => self.inner.looks.answered(item, gate, sent),
            _ => {}
        }
        answer
    }

    /// Gives the run's permits back (its body ended, its outcome is written, or it did not
    /// start), and hands each on to whoever waits for it: a run of this worker waiting in
    /// hand, while the gate's line is empty ([`super::in_hand`]), else the line's first.
    /// One that cannot be given back is logged; its entry is dropped by the next taker
    /// once the run's record shows it no longer holds it.
    pub(super) async fn release_permits(&self, permits: Permits, t: &Transition<'_>) {
        for (item, limit, share) in &permits.items {
            if let Some(since) = permits.since {
                self.inner.in_hand.gave_back_after(item, since.elapsed());
            }
            let from = (t.key, permits.owner.as_str());
            // Its entry is moved to its name first, if that write is in flight.
            self.entry_moved(item, *limit, from).await;
            if self.pass_to_next(item, *limit, from, t).await {
                continue;
            }
            if self.pass_in_hand(item, *limit, from, t).await {
                continue;
            }
            self.released_in_hand(item);
            let released = self
                .inner
                .store
                .release_permit(item, t.key, &permits.owner)
                .await;
            match released {
                Ok(gate) => {
                    // The gate as the give-back left it: what this worker's arriving runs
                    // decide from, rather than what a look read before.
                    self.inner.looks.saw(item, &gate);
                    self.hand_on(item, *limit, gate, Some(share), t).await
                }
                Err(e) => {
                    let error = e.to_string();
                    self.emit(t, Event::PermitKept { error: &error });
                }
            }
        }
    }

    /// A gate refused the run: it waits (its claim given back, its message back later),
    /// or, having waited longer than its job allows, fails unrun.
    #[allow(clippy::too_many_arguments)]
    async fn held_back(
        &self,
        ctx: &MessageCtx<'_>,
        envelope: &Envelope,
        job: &Routed<'_>,
        claim: &Claim,
        gate: &Gate,
        refused: Refusal,
        t: &Transition<'_>,
    ) -> Outcome {
        let now = self.inner.config.clock.now();
        let now_ms = now.timestamp_millis();
        let attempt = claim.record.attempt;
        let in_line = match &refused {
            Refusal::Gate(Permit::Full { line, .. }) => line.since_ms,
            _ => None,
        };
        // A first refusal waits since its claim: a wait in hand before it counts.
        let since = [known_since(ctx, claim), in_line]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(claim.request.now.timestamp_millis().min(now_ms));
        let waited = Duration::from_millis((now_ms - since).max(0) as u64);
        let max_wait = job.registered.policy.flow.max_wait;
        if let Some(max) = max_wait
            && waited > max
        {
            let error = format!(
                "waited {} s for limit `{}`, longer than the job's max_wait_seconds ({} s); not run",
                waited.as_secs(),
                gate.limit,
                max.as_secs()
            );
            let reason = DeadLetterReason::LimitWait;
            return self.fail_unrun(ctx, job, claim, reason, &error, t).await;
        }
        // The record remembers since when the attempt waits (see `known_since`).
        let mut restored = ExecutionRecord::given_back(claim.before.as_ref(), &claim.request);
        restored.waiting_since = Some(format!("{attempt}@{since}"));
        let store = &self.inner.store;
        let given = store.give_back(&claim.record, Some(&restored), &claim.request);
        let given = given.await;
        if let Err(e) = given {
            return self.claim_not_given_back(ctx, t, e).await;
        }
        // A chain's step keeps its Step Functions task alive while it waits.
        if let Some(task) = job.step_of.and_then(|c| c.heartbeat_of(envelope)) {
            task.beat().await;
        }
        // Past its max_wait it comes back to be dead-lettered, not woken.
        let left = max_wait.map_or(Duration::MAX, |max| max - waited + Duration::from_secs(1));
        if let Refusal::Gate(Permit::Full { holders, line, .. }) = &refused {
            let priority = priority_of(envelope, job);
            let parked = self.park(ctx, gate, line, holders.len(), since, priority, left, t);
            if let Some(outcome) = parked.await {
                return outcome;
            }
        }
        let draws = &self.inner.draws;
        let (retry_in, why) = match refused {
            Refusal::Gate(Permit::TooSoon { next_start_ms }) => {
                let jitter = draws.jitter(gate.spacing.unwrap_or_default());
                let wait_ms = (next_start_ms - now_ms).max(0);
                let why = format!("rate of `{}`: next start in {wait_ms} ms", gate.limit);
                (rate_look(next_start_ms, now_ms, jitter), why)
            }
            Refusal::Gate(Permit::Full { holders, line, .. }) => {
                if !line.place {
                    let priority = priority_of(envelope, job);
                    let seen = &self.inner.no_place;
                    seen.note(&gate.item, &gate.share, priority, since);
                }
                let jitter = draws.jitter(LONGEST_LOOK);
                let look = full_look(&line, ctx.delivery.waits(), jitter, left);
                (look, full_why(gate, holders.len(), &line))
            }
            Refusal::Crowded(crowded) => (crowded.look(left), crowded_why(gate, &crowded)),
            Refusal::Gate(Permit::Taken | Permit::Handed { .. }) => unreachable!("a refusal"),
        };
        let resent = self
            .come_back_waiting(ctx, retry_in, Some((attempt, since)))
            .await;
        let limit = &gate.limit;
        self.emit(t, Event::Throttled { limit, why: &why });
        Outcome::Throttled {
            limit: limit.clone(),
            retry_in,
            resent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_at_a_full_gate_looks_again_within_a_few_seconds() {
        let s = Duration::from_secs;
        assert_eq!(full_gate_look(0, s(2)), s(1), "first at once");
        assert_eq!(full_gate_look(4, Duration::ZERO), s(1));
        assert_eq!(full_gate_look(4, s(9)), LONGEST_LOOK, "never later");
    }

    #[test]
    fn a_run_with_no_place_in_the_line_looks_again_less_and_less_often() {
        let s = Duration::from_secs;
        let looks: Vec<u64> = (0..7)
            .map(|w| no_place_look(w, Duration::ZERO, Duration::MAX).as_secs())
            .collect();
        assert_eq!(looks, [2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(no_place_look(1, s(2), Duration::MAX), s(6), "jitter on top");
        assert_eq!(no_place_look(9, s(2), Duration::MAX), PARKED_FOR);
        assert_eq!(
            no_place_look(4, s(1), s(5)),
            s(5),
            "never past its max_wait"
        );
    }

    #[test]
    fn a_run_held_back_by_a_rate_looks_again_at_its_next_start() {
        let (ms, s) = (Duration::from_millis, Duration::from_secs);
        assert_eq!(
            rate_look(10_500, 10_000, ms(300)),
            s(1),
            "the first second after"
        );
        assert_eq!(rate_look(12_000, 10_000, ms(1_900)), s(3), "a second later");
        assert_eq!(rate_look(9_000, 10_000, ms(0)), s(0));
    }
}
