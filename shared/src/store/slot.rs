//! A job's overlap slot, and the item DynamoDB holds it in: the in-memory store keeps the
//! slot, the conditions in [`slot_conditions`](super::slot_conditions) read its item.

use super::attributes::Item;
use super::attributes::{n, s};

/// A job's overlap slot, as the slot item holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slot {
    /// The run that holds it.
    pub holder: Option<String>,
    /// The holder's claim (its owner token): a take-over is conditioned on it.
    pub holder_owner: Option<String>,
    /// When a waiter looks again at the latest (the holder's guessed end), epoch ms.
    pub until_ms: i64,
    /// The one run waiting for it (`buffer_one`).
    pub waiter: Option<String>,
    /// Until when the waiter's place is kept, epoch ms.
    pub waiter_until_ms: i64,
}

/// The slot as its item holds it in DynamoDB: the holder's attributes while it has one, the
/// waiter's while one waits.
pub(crate) fn slot_item(slot: &Slot) -> Item {
    let mut item = Item::new();
    if let Some(holder) = &slot.holder {
        item.insert("slot_key".into(), s(holder));
        item.insert("slot_until".into(), n(slot.until_ms));
        if let Some(owner) = &slot.holder_owner {
            item.insert("slot_owner".into(), s(owner));
        }
    }
    if let Some(waiter) = &slot.waiter {
        item.insert("waiter_key".into(), s(waiter));
        item.insert("waiter_until".into(), n(slot.waiter_until_ms));
    }
    item
}

/// The slot an item holds (the inverse of [`slot_item`]).
pub(crate) fn slot_of(item: &Item) -> Slot {
    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
    let number = |name: &str| {
        item.get(name)
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Slot {
        holder: text("slot_key"),
        holder_owner: text("slot_owner"),
        until_ms: number("slot_until"),
        waiter: text("waiter_key"),
        waiter_until_ms: number("waiter_until"),
    }
}
