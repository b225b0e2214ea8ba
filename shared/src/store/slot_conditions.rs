//! The conditions of a job's overlap slot item, each written once: the DynamoDB store sends
//! them ([`overlap`](super::overlap)), the in-memory store evaluates them over the slot as
//! DynamoDB holds it ([`slot_item`](super::slot::slot_item)).

use chrono::{DateTime, Utc};

use super::attributes::{n, s};
use super::condition::Condition;
use crate::job::Overlap;

/// The slot is free, or already the run's.
const FREE: &str = "(attribute_not_exists(#slot_key) OR #slot_key = :me)";
/// No other run waits for the slot, or its wait lapsed.
const WAITER_FREE: &str =
    "(attribute_not_exists(#waiter_key) OR #waiter_key = :me OR #waiter_until < :now)";
/// The waiter seen still waits (or the run itself, or nobody any longer).
const WAITER_WAS: &str = "(#waiter_key = :waiter OR #waiter_key = :me OR #waiter_until < :now)";
/// The slot is still the entry's: the run `:me` under the claim `:owner`.
pub(crate) const LEAVE: &str = "#slot_key = :me AND #slot_owner = :owner";

/// What a take-over saw of the slot: its holder and that holder's claim, and the waiter.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Seen<'a> {
    pub(crate) holder: Option<&'a str>,
    pub(crate) holder_owner: Option<&'a str>,
    pub(crate) waiter: Option<&'a str>,
}

fn waiting(policy: Overlap, slot: &str, waiter: &str) -> String {
    match policy {
        Overlap::BufferOne => format!("{slot} AND {waiter}"),
        _ => slot.to_string(),
    }
}

/// The first try of the run `key` at `now`: the slot is free or its own (and, under
/// `buffer_one`, nobody else waits).
pub(crate) fn take(key: &str, policy: Overlap, now: DateTime<Utc>) -> Condition {
    let condition = Condition::new(waiting(policy, FREE, WAITER_FREE)).value(":me", s(key));
    match policy {
        Overlap::BufferOne => condition.value(":now", n(now.timestamp_millis())),
        _ => condition,
    }
}

/// A take-over by the run `key`: the slot is still as `seen` (the very holder and claim,
/// and the waiter seen, or none).
pub(crate) fn take_over(
    key: &str,
    policy: Overlap,
    now: DateTime<Utc>,
    seen: Seen<'_>,
) -> Condition {
    let slot_was = match (seen.holder, seen.holder_owner) {
        (Some(_), Some(_)) => "#slot_key = :holder AND #slot_owner = :holder_owner",
        (Some(_), None) => "#slot_key = :holder AND attribute_not_exists(#slot_owner)",
        (None, _) => "attribute_not_exists(#slot_key)",
    };
    let waiter_was = match seen.waiter {
        Some(_) => WAITER_WAS,
        None => WAITER_FREE,
    };
    let text = waiting(policy, slot_was, waiter_was);
    let mut condition = Condition::new(text.clone());
    for (placeholder, value) in [
        (":holder", seen.holder),
        (":holder_owner", seen.holder_owner),
        (":waiter", seen.waiter),
    ] {
        if let Some(v) = value.filter(|_| names(&text, placeholder)) {
            condition = condition.value(placeholder, s(v));
        }
    }
    if policy == Overlap::BufferOne {
        condition = condition
            .value(":me", s(key))
            .value(":now", n(now.timestamp_millis()));
    }
    condition
}

/// The run `key` becomes the slot's one waiter: nobody else waits.
/// Whether a refused take-over found the slot held by this very entry (`key` under the
/// claim `owner`): its own first try, applied, its answer lost and the request sent again
/// by the SDK. The run entered. Both stores decide by it.
pub(crate) fn entered_by(
    holder: Option<&str>,
    holder_owner: Option<&str>,
    key: &str,
    owner: &str,
) -> bool {
    holder == Some(key) && holder_owner == Some(owner)
}

pub(crate) fn wait(key: &str, now: DateTime<Utc>) -> Condition {
    Condition::new(WAITER_FREE)
        .value(":me", s(key))
        .value(":now", n(now.timestamp_millis()))
}

/// The run `key` leaves the slot it entered under the claim `owner`.
pub(crate) fn leave(key: &str, owner: &str) -> Condition {
    Condition::new(LEAVE)
        .value(":me", s(key))
        .value(":owner", s(owner))
}

/// Whether `text` names the placeholder `placeholder` whole (`:holder` is a prefix of
/// `:holder_owner`).
fn names(text: &str, placeholder: &str) -> bool {
    text.match_indices(placeholder).any(|(i, _)| {
        !text[i + placeholder.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    })
}
