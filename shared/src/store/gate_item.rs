//! A flow-control gate's item, as the executions table keeps it: who holds a permit, who
//! waits for one, and when the next start of a rate may be; read from and written as
//! DynamoDB attributes. The model the permits ([`super::permits`]) and the line
//! ([`super::waiters`]) both work on, apart from either.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;

use super::attributes::{n, s};

/// How a reservation's owner begins: no claim's token does (a claim's is
/// `<worker>:<token>`, and a worker id never holds `handed:`), so no record ever holds
/// it, and the woken run's take replaces it.
pub const HANDED: &str = "handed:";

/// One holder's entry, as the gate's item keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The claim that took the permit, or a reservation ([`HANDED`]).
    pub owner: String,
    /// Until when its lease surely lasts (the claim's lease when it took it), epoch ms.
    pub until_ms: i64,
    /// Its run's fair share of the gate.
    pub share: String,
    /// The run of the same worker the permit goes to when this one's body ends, if one
    /// is set: it starts then without a request ([`super::waiters::promote_write`]).
    pub then: Option<Next>,
}

/// The run a holder's permit is set to go to next: a run of the holder's worker, claimed
/// and waiting in hand. The entry holds while either run's record says it may run, so the
/// permit passes from one body to the next in the worker's memory, and a taker drops the
/// entry only once both are gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Next {
    /// Its run's key.
    pub key: String,
    /// Its claim's owner token.
    pub owner: String,
}

impl Holder {
    /// Whether it is a reservation for a woken waiter, not a claim's permit.
    pub fn reserved(&self) -> bool {
        self.owner.starts_with(HANDED)
    }

    /// Since when the waiter a reservation was handed on to waited, epoch ms.
    pub fn handed_since(&self) -> Option<i64> {
        self.owner.strip_prefix(HANDED)?.parse().ok()
    }
}

/// A gate's item: its holders and, with a rate, its next start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateItem {
    /// Whether the item has a `holders` map at all (a new gate's first taker creates it).
    pub counted: bool,
    /// The runs that hold it, by key.
    pub holders: BTreeMap<String, Holder>,
    /// The earliest next start, epoch ms, when the gate has a rate.
    pub next_start_ms: Option<i64>,
    /// Whether the item has a `waiters` map at all (the first run to park creates it).
    pub has_waiters: bool,
    /// The runs waiting for a permit, by key.
    pub waiters: BTreeMap<String, Waiter>,
    /// When each share was last handed a permit, epoch ms: the share served longest ago
    /// comes first among equals (kept for the shares in the line or holding).
    pub served: BTreeMap<String, i64>,
}

/// A run waiting for a gate's permit, as the gate's item keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter {
    /// Since when it waits, epoch ms (its first refusal, kept across parks).
    pub since_ms: i64,
    /// Its priority: higher first.
    pub priority: i32,
    /// Its fair share of the gate: the runs of the share with fewest holders come first.
    pub share: String,
    /// What makes its message visible again.
    pub handle: String,
    /// When its message comes back by itself, epoch ms.
    pub until_ms: i64,
}

/// The most entries one take drops: only as many as it needs, so that its condition stays
/// far within DynamoDB's 4 KB expression limit however many dead holders a gate gathered.
pub(crate) const MOST_DROPPED: usize = 16;

/// A gate's item as DynamoDB returned it.
pub fn gate_item(item: &HashMap<String, AttributeValue>) -> GateItem {
    let number = |v: &AttributeValue| v.as_n().ok().and_then(|n| n.parse::<i64>().ok());
    let holders = item.get("holders").and_then(|h| h.as_m().ok());
    GateItem {
        counted: holders.is_some(),
        holders: holders
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| {
                        let entry = v.as_m().ok()?;
                        Some((
                            k.clone(),
                            Holder {
                                owner: entry.get("owner")?.as_s().ok()?.clone(),
                                until_ms: entry.get("until").and_then(number).unwrap_or(0),
                                share: entry
                                    .get("share")
                                    .and_then(|v| v.as_s().ok())
                                    .cloned()
                                    .unwrap_or_default(),
                                then: entry.get("then").and_then(next_of),
                            },
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default(),
        next_start_ms: item.get("next_start").and_then(number),
        has_waiters: item.contains_key("waiters"),
        served: item
            .get("served")
            .and_then(|m| m.as_m().ok())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), number(v)?)))
                    .collect()
            })
            .unwrap_or_default(),
        waiters: waiters_of(item),
    }
}

/// The run a holder's entry says comes next, as DynamoDB returned it.
fn next_of(v: &AttributeValue) -> Option<Next> {
    let m = v.as_m().ok()?;
    Some(Next {
        key: m.get("key")?.as_s().ok()?.clone(),
        owner: m.get("owner")?.as_s().ok()?.clone(),
    })
}

/// A holder's entry as DynamoDB holds it.
pub(crate) fn holder_value(h: &Holder) -> AttributeValue {
    let mut entry = HashMap::from([
        ("owner".to_string(), s(&h.owner)),
        ("until".to_string(), n(h.until_ms)),
        ("share".to_string(), s(&h.share)),
    ]);
    if let Some(next) = &h.then {
        let then = HashMap::from([
            ("key".to_string(), s(&next.key)),
            ("owner".to_string(), s(&next.owner)),
        ]);
        entry.insert("then".to_string(), AttributeValue::M(then));
    }
    AttributeValue::M(entry)
}

/// A waiter's entry as DynamoDB holds it.
pub(crate) fn waiter_value(w: &Waiter) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("since".to_string(), n(w.since_ms)),
        ("priority".to_string(), n(i64::from(w.priority))),
        ("share".to_string(), s(&w.share)),
        ("handle".to_string(), s(&w.handle)),
        ("until".to_string(), n(w.until_ms)),
    ]))
}

/// The waiters of a gate's item as DynamoDB returned it.
pub(crate) fn waiters_of(item: &HashMap<String, AttributeValue>) -> BTreeMap<String, Waiter> {
    let number = |v: Option<&AttributeValue>| {
        v.and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse::<i64>().ok())
    };
    let Some(map) = item.get("waiters").and_then(|w| w.as_m().ok()) else {
        return BTreeMap::new();
    };
    map.iter()
        .filter_map(|(k, v)| {
            let e = v.as_m().ok()?;
            let text = |name: &str| e.get(name).and_then(|v| v.as_s().ok()).cloned();
            Some((
                k.clone(),
                Waiter {
                    since_ms: number(e.get("since")).unwrap_or(0),
                    priority: number(e.get("priority")).unwrap_or(0) as i32,
                    share: text("share").unwrap_or_default(),
                    handle: text("handle")?,
                    until_ms: number(e.get("until")).unwrap_or(0),
                },
            ))
        })
        .collect()
}

/// A gate as its item holds it in DynamoDB (the inverse of [`gate_item`]).
pub(crate) fn gate_as_item(gate: &GateItem) -> HashMap<String, AttributeValue> {
    let mut item = HashMap::new();
    if gate.counted || !gate.holders.is_empty() {
        let holders = gate
            .holders
            .iter()
            .map(|(k, h)| (k.clone(), holder_value(h)))
            .collect();
        item.insert("holders".to_string(), AttributeValue::M(holders));
    }
    if let Some(next) = gate.next_start_ms {
        item.insert("next_start".to_string(), n(next));
    }
    if !gate.served.is_empty() {
        let served = gate
            .served
            .iter()
            .map(|(k, v)| (k.clone(), n(*v)))
            .collect();
        item.insert("served".to_string(), AttributeValue::M(served));
    }
    if gate.has_waiters || !gate.waiters.is_empty() {
        let waiters = gate
            .waiters
            .iter()
            .map(|(k, w)| (k.clone(), waiter_value(w)))
            .collect();
        item.insert("waiters".to_string(), AttributeValue::M(waiters));
    }
    item
}
