//! Runs waiting for a gate's permit (see [`crate::flow`]): parked in the gate's own item
//! and handed the permit by the run that gives one back, instead of looking again on a
//! timer.
//!
//! A run a full gate refuses writes itself into the gate's `waiters` map (its key →
//! since when it waits, its priority, its fair share, and the receipt handle of its
//! message, kept hidden on the queue). A run that gives a permit back reads the gate as
//! its release left it (the release's own answer, no extra read), picks the waiter that
//! comes first ([`next_waiter`]), and in one conditional write moves it from `waiters` to
//! `holders` under a reservation ([`HANDED`]); then it makes that waiter's message visible
//! at once. The woken run's take replaces the reservation with its own entry.
//!
//! Nothing here is trusted to happen: a waker that dies leaves the waiter's message to come
//! back by itself once its hiding runs out ([`PARKED_FOR`]), and it looks again then; a
//! woken run that never comes leaves a reservation whose hint runs out after [`HANDED_FOR`],
//! and the next taker drops it as it drops any holder that is gone (its owner names no
//! claim, so no record holds it). A permit is only ever held by a holder entry, so
//! nothing here can put a gate over its limit: the hand-on's condition counts the holders
//! as the take's does.
//!
//! The waiters live in one item with the holders, so they are bounded ([`MOST_WAITERS`]):
//! a run that finds the line full looks again later on a timer, as every waiting run did
//! before. The item stays far within DynamoDB's 400 KB (a receipt handle is under 1 KB).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;

use super::attributes::{n, s};
use super::condition::Condition;
use super::gate_item::{GateItem, HANDED, Holder, MOST_DROPPED, Waiter, waiter_value};

/// How long a reservation lasts for the woken run to come and take it: long past a
/// receive and a claim, short enough that a waiter whose message was deleted meanwhile
/// (its run cancelled, or a duplicate) holds its permit only briefly.
pub const HANDED_FOR: Duration = Duration::from_secs(15);

/// How long a parked message stays hidden when no one wakes it: the bound on a waiter
/// whose waker died (it comes back and looks again), and a receive each time it passes.
pub const PARKED_FOR: Duration = Duration::from_secs(30);

/// The most runs a gate's item keeps waiting; more look again on a timer.
pub const MOST_WAITERS: usize = 64;

/// How long a waiter waits to rise one priority, up to the highest waiting: a run `n`
/// levels below the highest is in the highest band after `n` × this long, and takes its
/// share's turns there, so no run waits behind higher priorities forever.
pub const AGING: Duration = Duration::from_secs(10);

impl Waiter {
    /// Its priority once `now_ms` has aged it ([`AGING`]), up to `top`, the highest
    /// priority waiting: aging lifts a run into the highest band and no further, so it
    /// never reorders runs of one priority (their order is their shares' turns).
    fn aged(&self, now_ms: i64, top: i32) -> i64 {
        let waited = (now_ms - self.since_ms).max(0);
        let aged = i64::from(self.priority) + waited / AGING.as_millis() as i64;
        aged.min(i64::from(top))
    }
}

/// The order a line serves its waiters in (the least first): the highest aged priority;
/// among equals, the one whose share holds fewest permits now, then whose share was served
/// longest ago (so the shares take turns: a key with a thousand waiting runs and a key with
/// one share the gate evenly); then the longest waiting; then by key, so that every waker
/// picks the same one from the same gate.
type Turn<'a> = (i64, usize, i64, i64, &'a str);

fn turn<'a>(
    item: &'a GateItem,
    now_ms: i64,
) -> impl Fn(&(&'a String, &'a Waiter)) -> Turn<'a> + 'a {
    let mut held: HashMap<&str, usize> = HashMap::new();
    for holder in item.holders.values() {
        *held.entry(holder.share.as_str()).or_default() += 1;
    }
    let top = item.waiters.values().map(|w| w.priority).max().unwrap_or(0);
    move |(key, w)| {
        let held = held.get(w.share.as_str()).copied().unwrap_or(0);
        let served = item.served.get(&w.share).copied().unwrap_or(0);
        (-w.aged(now_ms, top), held, served, w.since_ms, key.as_str())
    }
}

/// The waiter that gets the next permit: the first in the line's order ([`turn`]).
pub fn next_waiter(item: &GateItem, now_ms: i64) -> Option<(&String, &Waiter)> {
    item.waiters.iter().min_by_key(turn(item, now_ms))
}

/// The waiter a full line gives its place up to the run `key` (waiting as `waiter`) for,
/// as (its key, its handle): an entry whose run no longer waits ([`gone`]) first; else
/// the one that comes last once the newcomer is in the line, unless that is the newcomer
/// itself. So a full line never keeps out a quiet share's run or a higher priority for a
/// backlog's: the run put out of the line keeps its hidden message, comes back when its
/// hiding runs out and looks again like any run (its record remembers since when it
/// waits). The line's longest waiting run, which watches for a dead holder, is never put
/// out. None while the line has room or the run is in it.
pub fn bumped(
    item: &GateItem,
    key: &str,
    waiter: &Waiter,
    now_ms: i64,
) -> Option<(String, String)> {
    if item.waiters.len() < MOST_WAITERS || item.waiters.contains_key(key) {
        return None;
    }
    if let Some(entry) = gone(item, now_ms).into_iter().next() {
        return Some(entry);
    }
    let mut with = item.clone();
    with.waiters.insert(key.to_string(), waiter.clone());
    let watcher = with
        .waiters
        .iter()
        .min_by_key(|(k, w)| (w.since_ms, k.as_str()))
        .map(|(k, _)| k.clone());
    let (last, w) = with
        .waiters
        .iter()
        .filter(|(k, _)| Some(*k) != watcher.as_ref())
        .max_by_key(turn(&with, now_ms))?;
    (last != key).then(|| (last.clone(), w.handle.clone()))
}

/// How long past its hiding a waiter's entry is taken for gone: its message came back by
/// itself, and a run still waiting would have parked again (with a new hiding) by then.
pub const GONE_AFTER: Duration = Duration::from_secs(10);

/// The entries of the line (key, handle) whose runs no longer wait there: their message
/// came back [`GONE_AFTER`] ago and did not park again (their run ended otherwise, a
/// duplicate, a cancel). A take drops them, so that they never hold up a gate no one
/// releases; at most [`super::permits::MOST_DROPPED`], oldest first.
pub(crate) fn gone(item: &GateItem, now_ms: i64) -> Vec<(String, String)> {
    let after = GONE_AFTER.as_millis() as i64;
    let mut out: Vec<(&String, &Waiter)> = item
        .waiters
        .iter()
        .filter(|(_, w)| w.until_ms + after < now_ms)
        .collect();
    out.sort_by_key(|(_, w)| w.until_ms);
    out.into_iter()
        .take(MOST_DROPPED)
        .map(|(k, w)| (k.clone(), w.handle.clone()))
        .collect()
}

/// A run parks in a gate's line.
#[derive(Debug, Clone)]
pub struct ParkRequest<'a> {
    /// The gate's item key.
    pub item: &'a str,
    /// The run that waits.
    pub key: &'a str,
    /// Runs holding the gate at once.
    pub limit: u32,
    /// Its entry.
    pub waiter: Waiter,
    /// When, epoch ms: the line's order ages its waiters by it.
    pub now_ms: i64,
}

/// What parking found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parked {
    /// The run waits in the line; the run that frees a permit hands it on. The gate as the
    /// park left it: a permit free while others wait is handed on by the parker itself (a
    /// waker that died before it could).
    Waiting(GateItem),
    /// The gate has room and no one waits for it: the run may take a permit now.
    Room,
    /// The line is full of runs that come before it: the run looks again later.
    Crowded,
}

/// A conditional write of a gate's line: its update expression, the values only the
/// update uses (DynamoDB refuses a value no expression uses, so the condition keeps its
/// own), and its condition.
pub(crate) struct LineWrite {
    /// The update expression.
    pub update: &'static str,
    /// The update's own values.
    pub values: Vec<(&'static str, AttributeValue)>,
    /// The condition.
    pub condition: Condition,
}

/// The write that parks a run, for the gate as last seen (`map`: whether its item has a
/// `waiters` map; DynamoDB refuses a path into a map that does not exist): the run's entry
/// written (again, with a new handle, if it waits already), while the gate is full or
/// others wait before it, and the line has room or gives up the place of `bump` (the
/// waiter that comes last, [`bumped`], as key and handle: still the entry read).
pub(crate) fn park_write(
    req: &ParkRequest<'_>,
    map: bool,
    bump: Option<&(String, String)>,
) -> LineWrite {
    let entry = waiter_value(&req.waiter);
    let held = "(attribute_exists(#holders) AND size(#holders) >= :limit)";
    if !map {
        let line = AttributeValue::M(HashMap::from([(req.key.to_string(), entry)]));
        let condition = Condition::new(format!("attribute_not_exists(#waiters) AND {held}"))
            .value(":limit", n(i64::from(req.limit)));
        return LineWrite {
            update: "SET #waiters = :line",
            values: vec![(":line", line)],
            condition,
        };
    }
    let waits = format!(
        "attribute_exists(#waiters) AND ({held} OR size(#waiters) > :one \
         OR (size(#waiters) = :one AND attribute_not_exists(#waiters.#me)))"
    );
    let condition = match bump {
        None => Condition::new(format!(
            "{waits} AND (size(#waiters) < :most OR attribute_exists(#waiters.#me))"
        )),
        Some((out, handle)) => Condition::new(format!(
            "{waits} AND size(#waiters) >= :most AND attribute_not_exists(#waiters.#me) \
             AND #waiters.#out.#handle = :out"
        ))
        .name("#out", out)
        .value(":out", s(handle)),
    }
    .value(":most", n(MOST_WAITERS as i64))
    .name("#me", req.key)
    .value(":limit", n(i64::from(req.limit)))
    .value(":one", n(1));
    LineWrite {
        update: match bump {
            None => "SET #waiters.#me = :entry",
            Some(_) => "REMOVE #waiters.#out SET #waiters.#me = :entry",
        },
        values: vec![(":entry", entry)],
        condition,
    }
}

/// What a refused park found, from the gate as it was: no map yet (park again, creating
/// it), room for the run, or a full line.
pub(crate) fn park_refused(req: &ParkRequest<'_>, item: &GateItem) -> Option<Parked> {
    let full = item.holders.len() >= req.limit as usize;
    if !item.has_waiters && full {
        return None;
    }
    if !full && item.waiters.keys().all(|k| k == req.key) {
        return Some(Parked::Room);
    }
    if item.waiters.len() >= MOST_WAITERS && !item.waiters.contains_key(req.key) {
        return Some(Parked::Crowded);
    }
    // The gate changed between the two looks: park again against it as it is now.
    None
}

/// The permit handed on to the waiter `key`.
#[derive(Debug, Clone)]
pub struct HandOn<'a> {
    /// The gate's item key.
    pub item: &'a str,
    /// The waiter's run.
    pub key: &'a str,
    /// Its entry, as the waker read it (its handle names the entry it hands on to).
    pub waiter: &'a Waiter,
    /// Runs holding the gate at once.
    pub limit: u32,
    /// When.
    pub now_ms: i64,
    /// When each share was last served, this hand-on's included ([`served_after`]).
    pub served: BTreeMap<String, i64>,
}

/// When each share was last handed a permit, once `share` is handed one at `now_ms`: kept
/// only for the shares in the line or holding, so the map stays as small as the line.
pub fn served_after(gate: &GateItem, share: &str, now_ms: i64) -> BTreeMap<String, i64> {
    let present = |s: &String| {
        gate.waiters.values().any(|w| &w.share == s) || gate.holders.values().any(|h| &h.share == s)
    };
    let mut served: BTreeMap<String, i64> = gate
        .served
        .iter()
        .filter(|(s, _)| present(s))
        .map(|(s, at)| (s.clone(), *at))
        .collect();
    served.insert(share.to_string(), now_ms);
    served
}

/// The reservation a hand-on writes into `holders`: the waiter's share, a hint that
/// runs out after [`HANDED_FOR`], and an owner no claim has (what gives it back, should
/// the waiter's message be gone).
pub fn reservation(h: &HandOn<'_>) -> Holder {
    Holder {
        owner: format!("{HANDED}{}", h.waiter.since_ms),
        until_ms: h.now_ms + HANDED_FOR.as_millis() as i64,
        share: h.waiter.share.clone(),
        then: None,
    }
}

/// The write that hands a permit on: the waiter's entry, still the one read (the same
/// handle), moves into `holders` as a reservation, while the gate has room.
pub(crate) fn hand_on_write(h: &HandOn<'_>) -> LineWrite {
    let served = h.served.iter().map(|(s, at)| (s.clone(), n(*at))).collect();
    let condition = Condition::new(
        "#waiters.#w.#handle = :handle AND attribute_not_exists(#holders.#w) \
         AND size(#holders) < :limit",
    )
    .name("#w", h.key)
    .value(":handle", s(&h.waiter.handle))
    .value(":limit", n(i64::from(h.limit)));
    LineWrite {
        update: "REMOVE #waiters.#w SET #holders.#w = :held, #served = :served",
        values: vec![
            (":held", super::gate_item::holder_value(&reservation(h))),
            (":served", AttributeValue::M(served)),
        ],
        condition,
    }
}

/// A permit passed by the run that holds it, as its body ends, straight to a run of the
/// same worker that waits for it with its message in hand (`batch::in_hand`): no wake-up,
/// no receive, no take.
#[derive(Debug, Clone, Copy)]
pub struct Pass<'a> {
    /// The gate's item key.
    pub item: &'a str,
    /// The gate's concurrency.
    pub limit: u32,
    /// The run that gives it up, and the claim it holds it under.
    pub from: (&'a str, &'a str),
    /// The run it goes to, and its entry (its own claim's).
    pub to: (&'a str, &'a Holder),
    /// The taker was set as the giver's next ([`Holder::then`]) and runs already: the
    /// write only moves the entry to its name ([`promote_write`]).
    pub promote: bool,
}

/// The write that moves a permit to the run set as its next, which started when the
/// giver's body ended, with no request between: the giver's entry, still its claim's and
/// naming that run next, becomes the taker's. Not refused for a line that formed since
/// the next was set (the taker holds the permit already); a next of the taker's own is
/// set only while the line is empty, as a pass's.
pub(crate) fn promote_write(p: &Pass<'_>) -> LineWrite {
    let next = p.to.1.then.is_some();
    // The taker's own name in the condition too: the update's placeholders are named by
    // the condition's (a name only the update used was sent as its placeholder's text).
    let expression = if next {
        "#holders.#me.#owner = :owner AND #holders.#me.#then.#owner = :taker \
         AND attribute_not_exists(#holders.#next) \
         AND (attribute_not_exists(#waiters) OR size(#waiters) = :zero)"
    } else {
        "#holders.#me.#owner = :owner AND #holders.#me.#then.#owner = :taker \
         AND attribute_not_exists(#holders.#next)"
    };
    let mut condition = Condition::new(expression)
        .name("#me", p.from.0)
        .value(":owner", s(p.from.1))
        .value(":taker", s(&p.to.1.owner));
    if next {
        condition = condition.value(":zero", n(0));
    }
    LineWrite {
        update: "REMOVE #holders.#me SET #holders.#next = :held",
        values: vec![(":held", super::gate_item::holder_value(p.to.1))],
        condition: condition.name("#next", p.to.0),
    }
}

/// The write that passes a permit: the giver's entry, still its claim's, becomes the
/// taker's, while no run waits in the gate's line (the line comes first: a run parked by
/// any worker is handed the permit instead, by the giver's release and hand-on). The
/// taker's entry may name the run it goes to next ([`Holder::then`]).
pub(crate) fn pass_write(p: &Pass<'_>) -> LineWrite {
    if p.promote {
        return promote_write(p);
    }
    let condition = Condition::new(
        "#holders.#me.#owner = :owner AND attribute_not_exists(#holders.#next) \
         AND (attribute_not_exists(#waiters) OR size(#waiters) = :zero)",
    )
    .name("#me", p.from.0)
    .name("#next", p.to.0)
    .value(":owner", s(p.from.1))
    .value(":zero", n(0));
    LineWrite {
        update: "REMOVE #holders.#me SET #holders.#next = :held",
        values: vec![(":held", super::gate_item::holder_value(p.to.1))],
        condition,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::gate_item::waiters_of;

    fn waiter(since_ms: i64, priority: i32, share: &str) -> Waiter {
        Waiter {
            since_ms,
            priority,
            share: share.into(),
            handle: format!("h-{share}-{since_ms}"),
            until_ms: since_ms + 30_000,
        }
    }

    fn holder(share: &str) -> Holder {
        Holder {
            owner: "w:1".into(),
            until_ms: 0,
            share: share.into(),
            then: None,
        }
    }

    #[test]
    fn the_next_waiter_is_the_highest_priority_then_the_share_holding_least_then_the_oldest() {
        let mut gate = GateItem {
            counted: true,
            has_waiters: true,
            ..GateItem::default()
        };
        gate.holders.insert("a1".into(), holder("a"));
        gate.holders.insert("a2".into(), holder("a"));
        gate.waiters.insert("a3".into(), waiter(1_000, 0, "a"));
        gate.waiters.insert("a4".into(), waiter(1_100, 0, "a"));
        gate.waiters.insert("b1".into(), waiter(2_000, 0, "b"));
        let now = 3_000;
        let next = |g: &GateItem| next_waiter(g, now).map(|(k, _)| k.clone());
        assert_eq!(
            next(&gate).as_deref(),
            Some("b1"),
            "b holds nothing, a holds two: b's one run before a's older ones"
        );
        gate.waiters.insert("urgent".into(), waiter(2_900, 5, "a"));
        assert_eq!(next(&gate).as_deref(), Some("urgent"));
        gate.waiters.remove("urgent");
        gate.waiters.remove("b1");
        assert_eq!(next(&gate).as_deref(), Some("a3"), "the oldest of a share");
    }

    #[test]
    fn shares_take_turns_when_none_holds_a_permit() {
        let mut gate = GateItem::default();
        gate.waiters.insert("a1".into(), waiter(1_000, 0, "a"));
        gate.waiters.insert("a2".into(), waiter(1_100, 0, "a"));
        gate.waiters.insert("b1".into(), waiter(5_000, 0, "b"));
        gate.waiters.insert("c1".into(), waiter(6_000, 0, "c"));
        let mut order = Vec::new();
        for now in [10_000, 11_000, 12_000, 13_000] {
            let (key, w) = next_waiter(&gate, now).unwrap();
            let (key, share) = (key.clone(), w.share.clone());
            gate.served = served_after(&gate, &share, now);
            gate.waiters.remove(&key);
            order.push(key);
        }
        assert_eq!(
            order,
            ["a1", "b1", "c1", "a2"],
            "each share in turn, then again"
        );
    }

    #[test]
    fn a_low_priority_run_waiting_long_enough_comes_before_newer_higher_ones() {
        let next = |now| {
            let mut gate = GateItem::default();
            gate.waiters.insert("old-low".into(), waiter(0, 0, "x"));
            gate.waiters.insert("new-high".into(), waiter(now, 5, "y"));
            next_waiter(&gate, now).map(|(k, _)| k.clone()).unwrap()
        };
        assert_eq!(next(49_000), "new-high", "5 levels up, the old one aged 4");
        assert_eq!(next(61_000), "old-low", "aged 6 levels after 60 s");
    }

    #[test]
    fn a_full_line_gives_the_last_place_up_to_a_quiet_share_or_a_higher_priority() {
        let mut gate = GateItem {
            counted: true,
            has_waiters: true,
            ..GateItem::default()
        };
        gate.holders.insert("a-held".into(), holder("a"));
        for i in 0..MOST_WAITERS as i64 {
            gate.waiters
                .insert(format!("a{i:02}"), waiter(1_000 + i, 0, "a"));
        }
        let now = 2_000;
        let last = format!("a{:02}", MOST_WAITERS - 1);
        let handle = gate.waiters[&last].handle.clone();
        assert_eq!(
            bumped(&gate, "b1", &waiter(now, 0, "b"), now),
            Some((last.clone(), handle.clone())),
            "b holds nothing: its run takes the place of a's newest"
        );
        assert_eq!(
            bumped(&gate, "urgent", &waiter(now, 5, "a"), now),
            Some((last.clone(), handle)),
            "a higher priority takes it too"
        );
        assert_eq!(
            bumped(&gate, "a-new", &waiter(now, 0, "a"), now),
            None,
            "a's next run comes after a's waiting ones: no place"
        );
        assert_eq!(
            bumped(&gate, "a00", &waiter(now, 0, "a"), now),
            None,
            "in it"
        );
        gate.waiters.remove(&last);
        assert_eq!(
            bumped(&gate, "a-new", &waiter(now, 0, "a"), now),
            None,
            "room"
        );
    }

    #[test]
    fn a_full_line_never_puts_out_its_watcher_and_puts_out_the_gone_first() {
        let mut gate = GateItem {
            counted: true,
            has_waiters: true,
            ..GateItem::default()
        };
        gate.holders.insert("held".into(), holder("a"));
        // The longest waiting run is of priority 0, the others of 5: it comes last, yet
        // it watches for a dead holder.
        gate.waiters.insert("old".into(), waiter(0, 0, "a"));
        for i in 1..MOST_WAITERS as i64 {
            gate.waiters
                .insert(format!("p{i:02}"), waiter(1_000 + i, 5, "a"));
        }
        let now = 2_000;
        let (out, _) = bumped(&gate, "new", &waiter(now, 5, "b"), now).unwrap();
        assert_ne!(out, "old", "the watcher stays");
        // An entry whose message came back long ago and never parked again goes first.
        let mut gone = waiter(1_500, 5, "a");
        gone.until_ms = 0;
        gate.waiters.insert("p10".into(), gone);
        let later = now + 20_000;
        let (out, _) = bumped(&gate, "new", &waiter(later, 5, "b"), later).unwrap();
        assert_eq!(out, "p10");
    }

    #[test]
    fn a_waiter_survives_the_trip_through_dynamodb() {
        let w = waiter(5, -3, "tenant-a");
        let item = HashMap::from([(
            "waiters".to_string(),
            AttributeValue::M(HashMap::from([("k".to_string(), waiter_value(&w))])),
        )]);
        assert_eq!(waiters_of(&item).get("k"), Some(&w));
    }
}
