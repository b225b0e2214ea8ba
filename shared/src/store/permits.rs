//! Permits of flow-control gates (see [`crate::flow`]): who holds a gate, and when its next
//! start may take place.
//!
//! Each gate is one item in the executions table, under schedkit's own key space: `holders`,
//! a map from the run's key to the claim that took the permit (`owner`) and a hint of when
//! its lease may run out (`until`, epoch ms: the claim's lease when taken); and `next_start`,
//! epoch ms, for a gate with a rate. Taking a permit is one conditional `UpdateItem` that
//! adds the run to `holders` while fewer than the limit hold it (and moves `next_start` on by
//! the gate's spacing when it has passed); giving it back is another that removes the run's
//! entry, conditioned on its claim.
//!
//! Whether a holder still holds the gate is decided by its run's record, as for the overlap
//! slot: it holds it while its record is RUNNING under the same claim with a lease that,
//! allowing for the clock-skew bound, has not run out. A taker that finds the gate full
//! reads the records of the holders whose hint has passed (a run that ended without giving
//! its permit back, a worker that died) and drops those that no longer hold it in the same
//! conditional write that adds itself, conditioned on each dropped entry being the one it
//! read. So a permit never outlives its run's lease by more than the skew bound, heartbeats
//! keep it as they keep the lease, and a holder fenced out of its run is fenced out of its
//! permit with it.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

use super::attributes::{n, s};
use super::condition::Condition;
use super::dynamo::{is_condition_failure, refused_item, unavailable};
use super::gate_item::{GateItem, Holder, MOST_DROPPED, Waiter, gate_item, holder_value};
use super::{DynamoStore, ExecutionRecord, StoreError};

/// A run asks for a permit of a gate.
#[derive(Debug, Clone, Copy)]
pub struct PermitRequest<'a> {
    /// The gate's item key.
    pub item: &'a str,
    /// The run that asks.
    pub key: &'a str,
    /// Its claim's owner token: what names its entry.
    pub owner: &'a str,
    /// Runs holding the gate at once, if the gate counts them.
    pub concurrency: Option<u32>,
    /// The least time between two starts, if the gate has a rate.
    pub spacing: Option<Duration>,
    /// The run's fair share of the gate (see [`super::waiters::next_waiter`]).
    pub share: &'a str,
    /// Its priority: where it would stand in the gate's line.
    pub priority: i32,
    /// Since when it has waited (epoch ms), when it waited before: where it would stand.
    pub since_ms: Option<i64>,
    /// When.
    pub now: DateTime<Utc>,
    /// The run's lease: until when its entry surely holds without a look at its record.
    pub lease: Duration,
    /// How far clocks may disagree: a holder's lease must be this long past before its
    /// entry is dropped.
    pub skew: Duration,
}

/// What asking for a permit found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permit {
    /// The run holds a permit now.
    Taken,
    /// The run holds a permit now, handed on to it when it waited in the gate's line.
    Handed {
        /// Since when it waited, epoch ms.
        since_ms: i64,
    },
    /// As many runs as the limit allows hold the gate, or others wait for it first.
    Full {
        /// The runs that hold it.
        holders: Vec<String>,
        /// The gate as the refusal found it: its line of waiters.
        line: Line,
        /// The gate as a refused write answered it, if one did (not a read the take was
        /// given): what the worker's next runs arriving there decide from, with no
        /// write of their own.
        answered: Option<Box<GateItem>>,
    },
    /// The gate's rate allows no start before `next_start_ms` (epoch ms).
    TooSoon {
        /// The earliest next start, epoch ms.
        next_start_ms: i64,
    },
}

/// A full gate's line of waiters, as a refusal found it: what parking needs to know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Line {
    /// Whether the gate's item has a `waiters` map.
    pub map: bool,
    /// How many wait before the run that asked: those that have waited longer (since its
    /// entry's time, or since the request says it waits, or now). Its own entry never
    /// counts, or a lone waiter looking again would take itself for second and stop
    /// watching; the one none waits before watches for a dead holder.
    pub waiting: usize,
    /// Since when the run that asked waits in it, epoch ms, if it does.
    pub since_ms: Option<i64>,
    /// The soonest a holder's lease hint runs out, epoch ms: when the first run in the
    /// line looks whether that holder is gone (no release would wake it).
    pub soonest_until_ms: Option<i64>,
    /// Whether the run would find a place in the line: it is in it, the line has room, or
    /// it comes before the waiter that comes last (whose place it takes,
    /// [`super::waiters::bumped`]). A run without one looks again on a timer, unwritten.
    pub place: bool,
    /// How many runs other than the one that asked wait in the line, however long.
    pub others: usize,
    /// How many of the gate's permits the asking run's fair share holds.
    pub share_held: usize,
}

impl Line {
    /// The line of `item`, as the run that asks (`req`) finds it.
    pub(crate) fn of(item: &GateItem, req: &PermitRequest<'_>) -> Line {
        let key = req.key;
        let now_ms = req.now.timestamp_millis();
        let since_ms = item.waiters.get(key).map(|w| w.since_ms);
        let mine = since_ms.or(req.since_ms).unwrap_or(now_ms);
        let before = |(k, w): &(&String, &Waiter)| {
            k.as_str() != key && (w.since_ms, k.as_str()) < (mine, key)
        };
        let newcomer = Waiter {
            since_ms: mine,
            priority: req.priority,
            share: req.share.to_string(),
            handle: String::new(),
            until_ms: now_ms,
        };
        let full = item.waiters.len() >= super::waiters::MOST_WAITERS && since_ms.is_none();
        let place = !full || super::waiters::bumped(item, key, &newcomer, now_ms).is_some();
        Line {
            map: item.has_waiters,
            waiting: item.waiters.iter().filter(before).count(),
            since_ms,
            soonest_until_ms: item.holders.values().map(|h| h.until_ms).min(),
            place,
            others: item.waiters.keys().filter(|k| k.as_str() != key).count(),
            share_held: item
                .holders
                .values()
                .filter(|h| h.share == req.share)
                .count(),
        }
    }
}

/// Whether the gate's rate lets a run start at `now_ms`.
pub(crate) fn rate_allows(item: &GateItem, now_ms: i64) -> bool {
    item.next_start_ms.is_none_or(|next| next <= now_ms)
}

/// The holders whose records say whether they still hold, in the order they are looked at:
/// an entry of the same run under another claim first (a claim that took the permit before
/// it lost the run, or a late answer of one: it never counts for the claim that asks now),
/// then those whose hint has passed, the longest past first.
pub(crate) fn to_look_at(item: &GateItem, req: &PermitRequest<'_>) -> Vec<(String, String)> {
    let now = req.now.timestamp_millis();
    let skew = req.skew.as_millis() as i64;
    let mut out: Vec<(&String, &Holder)> = item
        .holders
        .iter()
        .filter(|(k, h)| match k.as_str() == req.key {
            // A reservation is this run's, whichever claim takes it: replaced unread.
            true => h.owner != req.owner && !h.reserved(),
            false => h.until_ms + skew < now,
        })
        .collect();
    out.sort_by_key(|(k, h)| (k.as_str() != req.key, h.until_ms));
    out.into_iter()
        .map(|(k, h)| (k.clone(), h.owner.clone()))
        .collect()
}

/// Whether a taker that found `item` full, having dropped `dropped`, looks at another holder.
pub(crate) fn looks_further(
    item: &GateItem,
    req: &PermitRequest<'_>,
    dropped: &[(String, String)],
) -> bool {
    !room_for(item, req, dropped) && dropped.len() < MOST_DROPPED
}

/// Whether the run of `record` no longer holds a permit its claim `owner` took: its
/// attempt under that claim can no longer be running, because the record is decided or
/// another claim's, or its lease ran out more than the skew bound ago. A CANCELLED attempt
/// runs on until its next heartbeat is refused, so it holds while its lease lasts, as it
/// holds its job's overlap slot ([`ExecutionRecord::attempt_may_run`]).
pub(crate) fn holder_gone(
    record: Option<&ExecutionRecord>,
    owner: &str,
    now: DateTime<Utc>,
    skew: Duration,
) -> bool {
    let alive_after = now - chrono::Duration::from_std(skew).unwrap_or_default();
    !record.is_some_and(|r| r.owner.as_deref() == Some(owner) && r.attempt_may_run(alive_after))
}

/// Whether the entry `(key, owner)` (`holder` as read) no longer holds its permit: its
/// run's record says so, and so does that of the run it names next, if any (the permit
/// passes to that one in its worker's memory).
async fn entry_gone(
    gate: &impl GateRequests,
    holder: Option<&Holder>,
    (key, owner): (&str, &str),
    req: &PermitRequest<'_>,
) -> Result<bool, StoreError> {
    let record = gate.holder(key).await?;
    if !holder_gone(record.as_ref(), owner, req.now, req.skew) {
        return Ok(false);
    }
    let Some(next) = holder.and_then(|h| h.then.as_ref()) else {
        return Ok(true);
    };
    let record = gate.holder(&next.key).await?;
    Ok(holder_gone(record.as_ref(), &next.owner, req.now, req.skew))
}

/// Whether the run may enter `item` once the holders `dropped` (key and claim) are gone: it
/// holds the gate already under its own claim, or, counting the gate as it would be, there
/// is room. An entry of the same run under another claim is replaced only when dropped.
pub(crate) fn room_for(
    item: &GateItem,
    req: &PermitRequest<'_>,
    dropped: &[(String, String)],
) -> bool {
    let Some(limit) = req.concurrency else {
        return true;
    };
    let left = item.holders.len() - dropped.len();
    match item.holders.get(req.key) {
        Some(h) if h.owner == req.owner || h.reserved() => true,
        Some(_) if !dropped.iter().any(|(k, _)| k == req.key) => false,
        _ => left < limit as usize,
    }
}

/// The entry a run writes for itself.
pub(crate) fn entry_of(req: &PermitRequest<'_>) -> Holder {
    Holder {
        owner: req.owner.to_string(),
        until_ms: req.now.timestamp_millis() + req.lease.as_millis() as i64,
        share: req.share.to_string(),
        then: None,
    }
}

/// The next start after a run starts at `now`: the spacing rounded up to the next whole
/// millisecond (the item keeps whole milliseconds; rounded down, `3/second` would let four
/// start within 999 ms), so a rate whose spacing is a fraction of a millisecond starts a
/// little less often than it says, never more.
pub(crate) fn next_start(req: &PermitRequest<'_>) -> Option<i64> {
    req.spacing.map(|s| {
        let ms = s.as_nanos().div_ceil(1_000_000);
        req.now.timestamp_millis() + i64::try_from(ms).unwrap_or(i64::MAX / 2)
    })
}

/// How long a gate's item is kept after its last permit: longer than any run holds one.
const GATE_KEPT: i64 = 30 * 86_400;

/// Attempts at a permit before a run is told the gate is full: each lost race means
/// another run took a place meanwhile.
const TRIES: usize = 3;

/// The two requests taking a permit makes, served by DynamoDB or by memory: the loop that
/// makes them ([`take_permit`]) is written once.
pub(crate) trait GateRequests {
    /// The record of the holder `key` (strongly consistent).
    async fn holder(&self, key: &str) -> Result<Option<ExecutionRecord>, StoreError>;
    /// The write that enters the gate ([`enter_condition`]): the run's own entry it
    /// replaced, if any; the gate as it was when refused.
    async fn enter_gate(
        &self,
        req: &PermitRequest<'_>,
        entry: &Entry,
    ) -> Result<Result<Option<Holder>, GateItem>, StoreError>;
}

/// How a take enters the gate, from what it saw of it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Entry {
    /// The holders it drops (key, claim), each gone.
    pub dropped: Vec<(String, String)>,
    /// The item has no holders map yet: the take creates it.
    pub fresh: bool,
    /// The run waits in the gate's line: its take leaves it.
    pub waiting: bool,
    /// Entries of the line it drops (key, handle), each gone ([`super::waiters::gone`]):
    /// a run not in the line enters only when no one else waits.
    pub gone: Vec<(String, String)>,
}

/// Takes a permit of the gate `req.item` for the run `req.key` (one write; a full gate
/// costs a read of holders whose hint has passed, until one is found gone, and then a
/// second write that drops it and enters).
///
/// `seen`: the gate as a read just found it ([`DynamoStore::read_gates`]), when the run
/// looks at a gate its worker watches: the take decides from it as from a refusal's
/// answer, so a gate that read shows full costs no write.
pub(crate) async fn take_permit(
    gate: &impl GateRequests,
    req: &PermitRequest<'_>,
    seen: Option<GateItem>,
) -> Result<Permit, StoreError> {
    let mut seen = seen;
    // Whether `seen` is a refused write's answer, not the read the take was given.
    let mut answered = false;
    for _ in 0..TRIES {
        let mut dropped = Vec::new();
        let mut gone = Vec::new();
        if let Some(item) = &seen {
            if !rate_allows(item, req.now.timestamp_millis()) {
                let next_start_ms = item.next_start_ms.unwrap_or_default();
                return Ok(Permit::TooSoon { next_start_ms });
            }
            for (key, owner) in to_look_at(item, req) {
                if !looks_further(item, req, &dropped) {
                    break;
                }
                if entry_gone(gate, item.holders.get(&key), (&key, &owner), req).await? {
                    dropped.push((key, owner));
                }
            }
            let mine = item
                .holders
                .get(req.key)
                .is_some_and(|h| h.owner == req.owner || h.reserved());
            let room = room_for(item, req, &dropped);
            // A run in the line itself may take a free permit (its waker died, or it came
            // back by itself); any other waits behind the line.
            let in_line = item.waiters.contains_key(req.key);
            gone = super::waiters::gone(item, req.now.timestamp_millis());
            let waiting = item.waiters.len() - gone.len();
            let queued = !mine && !in_line && waiting > 0 && req.concurrency.is_some();
            if item.counted && (!room || queued) {
                let holders = item.holders.keys().cloned().collect();
                let line = Line::of(item, req);
                let answered = answered.then(|| Box::new(item.clone()));
                return Ok(Permit::Full {
                    holders,
                    line,
                    answered,
                });
            }
        }
        let entry = Entry {
            fresh: seen.as_ref().is_some_and(|i| !i.counted),
            waiting: seen
                .as_ref()
                .is_some_and(|i| i.waiters.contains_key(req.key)),
            dropped,
            gone,
        };
        match gate.enter_gate(req, &entry).await? {
            Ok(replaced) => {
                let since_ms = replaced.as_ref().and_then(Holder::handed_since);
                return Ok(since_ms.map_or(Permit::Taken, |since_ms| Permit::Handed { since_ms }));
            }
            Err(item) => (seen, answered) = (Some(item), true),
        }
    }
    let item = seen.unwrap_or_default();
    Ok(match rate_allows(&item, req.now.timestamp_millis()) {
        false => Permit::TooSoon {
            next_start_ms: item.next_start_ms.unwrap_or_default(),
        },
        true => Permit::Full {
            holders: item.holders.keys().cloned().collect(),
            line: Line::of(&item, req),
            answered: answered.then(|| Box::new(item.clone())),
        },
    })
}

/// The condition of the write that enters the gate: with a limit, the run's entry may be
/// added (there is room once the entries `dropped` go, each still the claim read, and no
/// other run waits for it, unless this one does too; or the entry is its own already, or a
/// reservation handed on to it), or, for a gate with no holders yet (`fresh`), the holders
/// map is new; with a rate, the next start has come.
pub(crate) fn enter_condition(req: &PermitRequest<'_>, entry: &Entry) -> Condition {
    let (dropped, fresh) = (&entry.dropped, entry.fresh);
    let mut conditions = Vec::new();
    let mut names: Vec<(String, String)> = Vec::new();
    let mut values: Vec<(String, AttributeValue)> = Vec::new();
    if let Some(limit) = req.concurrency {
        if fresh {
            conditions.push("attribute_not_exists(#holders)".to_string());
        } else {
            names.push(("#me".into(), req.key.to_string()));
            values.push((":owner".into(), s(req.owner)));
            let mut others = 0i64;
            let mut stale = None;
            for (i, (key, owner)) in dropped.iter().enumerate() {
                if key == req.key {
                    // The same run's entry under a claim that no longer holds it:
                    // replaced, not removed (one path may not be both).
                    stale = Some(owner);
                    continue;
                }
                others += 1;
                conditions.push(format!("#holders.#g{i}.#owner = :g{i}"));
                names.push((format!("#g{i}"), key.clone()));
                values.push((format!(":g{i}"), s(owner)));
            }
            values.push((":limit".into(), n(i64::from(limit) + others)));
            values.push((":handed".into(), s(super::gate_item::HANDED)));
            let room = room_test(entry, &mut names, &mut values);
            let mut me = vec![
                room.as_str(),
                "#holders.#me.#owner = :owner",
                "begins_with(#holders.#me.#owner, :handed)",
            ];
            if let Some(stale) = stale {
                me.push("(#holders.#me.#owner = :stale AND size(#holders) <= :limit)");
                values.push((":stale".into(), s(stale)));
            }
            conditions.push(format!(
                "attribute_exists(#holders) AND ({})",
                me.join(" OR ")
            ));
        }
    }
    if next_start(req).is_some() {
        conditions.push("(attribute_not_exists(#next_start) OR #next_start <= :now)".into());
        values.push((":now".into(), n(req.now.timestamp_millis())));
    }
    let mut condition = Condition::new(match conditions.is_empty() {
        true => "attribute_exists(#expires_at) OR attribute_not_exists(#expires_at)".to_string(),
        false => conditions.join(" AND "),
    });
    for (placeholder, attribute) in names {
        condition = condition.name(&placeholder, &attribute);
    }
    for (placeholder, value) in values {
        condition = condition.value(&placeholder, value);
    }
    condition
}

/// The test of a take that adds its run to a gate with room: in the line itself, it leaves
/// it as it enters; not in the line, only while no one waits (but those it drops as gone,
/// each still the entry it read).
fn room_test(
    entry: &Entry,
    names: &mut Vec<(String, String)>,
    values: &mut Vec<(String, AttributeValue)>,
) -> String {
    let room = "attribute_not_exists(#holders.#me) AND size(#holders) < :limit";
    if entry.waiting {
        return format!("({room} AND attribute_exists(#waiters.#me))");
    }
    if entry.gone.is_empty() {
        values.push((":zero".into(), n(0)));
        return format!("({room} AND (attribute_not_exists(#waiters) OR size(#waiters) = :zero))");
    }
    values.push((":gone".into(), n(entry.gone.len() as i64)));
    let mut test = format!("({room} AND size(#waiters) = :gone");
    for (i, (key, handle)) in entry.gone.iter().enumerate() {
        test.push_str(&format!(" AND #waiters.#x{i}.#handle = :x{i}"));
        names.push((format!("#x{i}"), key.clone()));
        values.push((format!(":x{i}"), s(handle)));
    }
    test.push(')');
    test
}

/// The condition of giving a permit back: the entry of `key` is still the claim `owner`'s;
/// with `owner` [`HANDED`](super::gate_item::HANDED) alone, whatever reservation was handed
/// on to the run (a woken run that will not take it passes it on).
pub(crate) fn release_condition(key: &str, owner: &str) -> Condition {
    let test = match owner == super::gate_item::HANDED {
        true => "begins_with(#holders.#me.#owner, :owner)",
        false => "#holders.#me.#owner = :owner",
    };
    Condition::new(test)
        .name("#me", key)
        .value(":owner", s(owner))
}

impl GateRequests for DynamoStore {
    async fn holder(&self, key: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        self.get(key).await
    }

    async fn enter_gate(
        &self,
        req: &PermitRequest<'_>,
        entry: &Entry,
    ) -> Result<Result<Option<Holder>, GateItem>, StoreError> {
        Ok(self
            .write_entry(req, entry)
            .await?
            .map(|old| gate_item(&old).holders.remove(req.key))
            .map_err(|item| gate_item(&item)))
    }
}

impl DynamoStore {
    /// Takes a permit of the gate `req.item` for the run `req.key` ([`take_permit`]).
    pub async fn take_permit(&self, req: &PermitRequest<'_>) -> Result<Permit, StoreError> {
        take_permit(self, req, None).await
    }

    /// Takes a permit from the gate as a read just found it (`seen`): no write while it
    /// shows the gate full ([`take_permit`]).
    pub async fn take_permit_seen(
        &self,
        req: &PermitRequest<'_>,
        seen: GateItem,
    ) -> Result<Permit, StoreError> {
        take_permit(self, req, Some(seen)).await
    }

    /// The write that enters the gate: the run's entry added (dropping the entries
    /// `dropped`, each conditioned on the claim it named; leaving the line, if it waits in
    /// it), or, for a gate whose item has no holders yet (`fresh`), the holders map created
    /// with it; the rate's next start moved on. The item as it was when refused.
    async fn write_entry(
        &self,
        req: &PermitRequest<'_>,
        how: &Entry,
    ) -> Result<Result<HashMap<String, AttributeValue>, HashMap<String, AttributeValue>>, StoreError>
    {
        let (dropped, fresh) = (&how.dropped, how.fresh);
        let mut set = vec!["#expires_at = :ttl".to_string()];
        let mut remove = Vec::new();
        let mut values = vec![(":ttl".to_string(), n(req.now.timestamp() + GATE_KEPT))];
        if req.concurrency.is_some() {
            let entry = holder_value(&entry_of(req));
            if fresh {
                set.push("#holders = :holders".into());
                let holders = HashMap::from([(req.key.to_string(), entry)]);
                values.push((":holders".into(), AttributeValue::M(holders)));
            } else {
                set.push("#holders.#me = :entry".into());
                values.push((":entry".into(), entry));
                for (i, (key, _)) in dropped.iter().enumerate() {
                    if key != req.key {
                        remove.push(format!("#holders.#g{i}"));
                    }
                }
                if how.waiting {
                    remove.push("#waiters.#me".into());
                } else {
                    for i in 0..how.gone.len() {
                        remove.push(format!("#waiters.#x{i}"));
                    }
                }
            }
        }
        if let Some(next) = next_start(req) {
            set.push("#next_start = :next".into());
            values.push((":next".into(), n(next)));
        }
        let mut update = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            update.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        let mut request = self.update(req.item, &update, enter_condition(req, how));
        for (name, value) in values {
            request = request.expression_attribute_values(name, value);
        }
        match self.timed(request.send()).await? {
            Ok(out) => Ok(Ok(out.attributes().cloned().unwrap_or_default())),
            Err(e) if is_condition_failure(&e) => Ok(Err(refused_item(&e).unwrap_or_default())),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Gives back the permit of the gate `item` the run `key` took under the claim `owner`
    /// (one `UpdateItem`); nothing when the entry is no longer that claim's. The gate as the
    /// release left it (DynamoDB's answer to the write itself: no read), for the permit to
    /// be handed on to whoever waits.
    pub async fn release_permit(
        &self,
        item: &str,
        key: &str,
        owner: &str,
    ) -> Result<GateItem, StoreError> {
        let result = self
            .update(item, "REMOVE #holders.#me", release_condition(key, owner))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .send();
        match self.timed(result).await? {
            Ok(out) => Ok(out.attributes().map(gate_item).unwrap_or_default()),
            Err(e) if is_condition_failure(&e) => {
                Ok(refused_item(&e).as_ref().map(gate_item).unwrap_or_default())
            }
            Err(e) => Err(unavailable(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Status;
    use std::collections::BTreeMap;

    fn request<'a>(key: &'a str, now: DateTime<Utc>) -> PermitRequest<'a> {
        PermitRequest {
            share: "",
            priority: 0,
            since_ms: None,
            item: ".schedkit/limit/partner",
            key,
            owner: "w:1",
            concurrency: Some(2),
            spacing: None,
            now,
            lease: Duration::from_secs(10),
            skew: Duration::from_secs(1),
        }
    }

    #[test]
    fn only_holders_whose_lease_hint_passed_by_the_skew_bound_are_looked_at() {
        let now: DateTime<Utc> = "2026-12-01T12:00:00Z".parse().unwrap();
        let ms = now.timestamp_millis();
        let holder = |until_ms| Holder {
            owner: "w:0".into(),
            until_ms,
            share: String::new(),
            then: None,
        };
        let item = GateItem {
            counted: true,
            holders: BTreeMap::from([
                ("fresh".to_string(), holder(ms + 5_000)),
                ("within-skew".to_string(), holder(ms - 500)),
                ("past".to_string(), holder(ms - 1_500)),
                ("me".to_string(), holder(ms - 9_000)),
            ]),
            next_start_ms: None,
            ..GateItem::default()
        };
        let keys = |v: Vec<(String, String)>| v.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        let looked = keys(to_look_at(&item, &request("me", now)));
        assert_eq!(
            looked,
            ["me", "past"],
            "its own run under another claim, whatever its hint"
        );
        let mine = PermitRequest {
            owner: "w:0",
            ..request("me", now)
        };
        let looked = keys(to_look_at(&item, &mine));
        assert_eq!(looked, ["past"]);
        assert!(room_for(&item, &mine, &[]), "it holds already");
        assert!(!room_for(&item, &request("new", now), &[]));
        let dropped = |keys: &[&str]| -> Vec<(String, String)> {
            keys.iter()
                .map(|k| (k.to_string(), "w:0".to_string()))
                .collect()
        };
        let past = dropped(&["past"]);
        assert!(
            !room_for(&item, &request("new", now), &past),
            "four less one"
        );
        let three = dropped(&["past", "fresh", "within-skew"]);
        assert!(room_for(&item, &request("new", now), &three));
        assert!(
            !room_for(&item, &request("me", now), &three),
            "its run's entry under another claim, not dropped"
        );
        let with_me = dropped(&["past", "fresh", "me"]);
        assert!(room_for(&item, &request("me", now), &with_me), "replaced");
    }

    #[test]
    fn a_holder_holds_while_its_record_runs_under_its_claim_and_lease() {
        let now: DateTime<Utc> = "2026-12-01T12:00:00Z".parse().unwrap();
        let skew = Duration::from_secs(1);
        let mut r: ExecutionRecord = serde_json::from_value(serde_json::json!({
            "execution_key": "k", "job": "j", "scheduled_for": "2026-12-01T00:00:00Z",
            "status": "RUNNING", "payload_hash": "h", "created_at": "", "updated_at": "",
            "expires_at": 0, "owner": "w:1",
            "lease_expires_at": now.timestamp_millis() - 500,
        }))
        .unwrap();
        assert!(!holder_gone(Some(&r), "w:1", now, skew), "within the skew");
        assert!(holder_gone(Some(&r), "w:2", now, skew), "another claim");
        r.lease_expires_at = Some(now.timestamp_millis() - 1_001);
        assert!(holder_gone(Some(&r), "w:1", now, skew), "its lease ran out");
        r.lease_expires_at = Some(now.timestamp_millis() + 60_000);
        r.status = Status::Cancelled;
        assert!(
            !holder_gone(Some(&r), "w:1", now, skew),
            "cancelled, its attempt may still run"
        );
        r.status = Status::Done;
        assert!(holder_gone(Some(&r), "w:1", now, skew), "decided");
        assert!(holder_gone(None, "w:1", now, skew));
    }

    #[test]
    fn a_rate_moves_the_next_start_on_by_its_spacing() {
        let now: DateTime<Utc> = "2026-12-01T12:00:00Z".parse().unwrap();
        let req = PermitRequest {
            spacing: Some(Duration::from_secs(2)),
            ..request("me", now)
        };
        let ms = now.timestamp_millis();
        assert_eq!(next_start(&req), Some(ms + 2_000));
        let mut item = GateItem::default();
        assert!(rate_allows(&item, ms));
        item.next_start_ms = Some(ms + 1);
        assert!(!rate_allows(&item, ms));
        item.next_start_ms = Some(ms);
        assert!(rate_allows(&item, ms));
    }

    /// A rate whose spacing is not whole milliseconds (`3/second`: 333.3 ms) is spaced
    /// by the next whole millisecond up: its starts, each as early as the gate lets it,
    /// never put one start more than the rate allows in a window (spaced 333 ms, four
    /// started within 999 ms).
    #[test]
    fn a_spacing_of_a_fraction_of_a_millisecond_never_lets_a_window_hold_one_start_more() {
        let start: DateTime<Utc> = "2026-12-01T12:00:00Z".parse().unwrap();
        for text in ["3/second", "7/second", "70/second", "1000/second", "7/hour"] {
            let rate: crate::flow::Rate = text.parse().unwrap();
            let allowed = rate.starts.get() as usize;
            let mut item = GateItem::default();
            let mut starts = Vec::new();
            let mut ms = start.timestamp_millis();
            while starts.len() <= allowed {
                if rate_allows(&item, ms) {
                    starts.push(ms);
                    let now = DateTime::from_timestamp_millis(ms).unwrap();
                    let req = PermitRequest {
                        spacing: Some(rate.spacing()),
                        ..request("me", now)
                    };
                    item.next_start_ms = next_start(&req);
                    ms = item.next_start_ms.unwrap();
                } else {
                    ms += 1;
                }
            }
            let span = starts[allowed] - starts[0];
            assert!(
                span >= rate.per.as_millis() as i64,
                "{text}: {} starts within {span} ms",
                allowed + 1
            );
        }
    }

    #[test]
    fn a_run_in_line_counts_only_those_that_waited_longer_before_it() {
        let waiter = |since_ms| Waiter {
            since_ms,
            priority: 0,
            share: String::new(),
            handle: "h".into(),
            until_ms: since_ms + 30_000,
        };
        let mut item = GateItem {
            counted: true,
            has_waiters: true,
            ..GateItem::default()
        };
        item.waiters.insert("lone".into(), waiter(1_000));
        let now: DateTime<Utc> = "2026-12-01T12:00:00Z".parse().unwrap();
        let of = |item: &GateItem, key| Line::of(item, &request(key, now));
        let lone = of(&item, "lone");
        assert_eq!(
            (lone.waiting, lone.since_ms),
            (0, Some(1_000)),
            "first in line"
        );
        item.waiters.insert("later".into(), waiter(2_000));
        item.waiters.insert("earlier".into(), waiter(500));
        assert_eq!(of(&item, "lone").waiting, 1, "one waited longer");
        assert_eq!(of(&item, "later").waiting, 2);
        assert_eq!(of(&item, "newcomer").waiting, 3, "not in line: all");
        let old = PermitRequest {
            since_ms: Some(100),
            ..request("old-newcomer", now)
        };
        assert_eq!(
            Line::of(&item, &old).waiting,
            0,
            "waited longest: it watches"
        );
    }

    #[test]
    fn a_run_that_waited_long_has_a_place_in_a_full_line_a_new_one_has_not() {
        let now: DateTime<Utc> = "2026-12-01T12:00:00Z".parse().unwrap();
        let ms = now.timestamp_millis();
        let mut item = GateItem {
            counted: true,
            has_waiters: true,
            ..GateItem::default()
        };
        for i in 0..super::super::waiters::MOST_WAITERS as i64 {
            let w = Waiter {
                since_ms: ms - 1_000 + i,
                priority: 1,
                share: String::new(),
                handle: format!("h{i}"),
                until_ms: ms + 30_000,
            };
            item.waiters.insert(format!("w{i:02}"), w);
        }
        assert!(
            !Line::of(&item, &request("new", now)).place,
            "it comes last"
        );
        let waited = PermitRequest {
            since_ms: Some(ms - 120_000),
            ..request("waited", now)
        };
        assert!(
            Line::of(&item, &waited).place,
            "aged to the top band, the oldest"
        );
    }
}
