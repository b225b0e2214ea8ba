//! Effects committed with the outcome.
//!
//! A job that writes to its own DynamoDB tables can hand the writes to the framework
//! instead of making them: [`Effects`] (on the [`Ctx`](crate::Ctx)) collects
//! them, and when the job succeeds they are committed in one `TransactWriteItems` together
//! with the DONE transition of the run, conditioned on the owner token and a live lease.
//! Effect and outcome happen together or not at all: a worker killed before the commit
//! leaves no effect (the next attempt makes it), a worker fenced out by a new owner has its
//! commit refused whole, and a job that fails has its effects dropped. It also costs one
//! request less than writing the effect itself (claim and commit: two per run).
//!
//! Effects anywhere else (an HTTP API, another store) cannot join the transaction: use the
//! run's execution key (`ctx.key`) as their idempotency key, which makes them applied at
//! least once, and once per key wherever the downstream honours it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem, Update,
};

/// Items one `TransactWriteItems` may hold (DynamoDB's limit), one of them the record's own
/// transition.
pub(crate) const MAX_EFFECTS: usize = 99;
/// DynamoDB's limit on a transaction's total size, bytes.
pub(crate) const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;

/// The writes a job hands the framework, committed with its outcome if it succeeds.
/// Cheap to clone: clones share one list.
#[derive(Clone, Debug, Default)]
pub struct Effects {
    items: Arc<Mutex<Vec<TransactWriteItem>>>,
}

/// Effects that cannot be committed as they are: the job's mistake, not an outage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EffectsError {
    /// More writes than one transaction takes.
    #[error(
        "the job handed {count} effects; at most {MAX_EFFECTS} commit with the outcome (DynamoDB's 100 items per transaction, one of them the run's record)"
    )]
    TooMany {
        /// How many the job handed.
        count: usize,
    },
    /// Writes larger than one transaction takes.
    #[error(
        "the job's effects are about {bytes} bytes; a transaction takes at most {MAX_TRANSACTION_BYTES}"
    )]
    TooLarge {
        /// Their approximate size (attribute names and values).
        bytes: usize,
    },
}

impl Effects {
    /// A `Put` (a whole item) to commit with the outcome.
    pub fn put(&self, put: Put) {
        self.push(TransactWriteItem::builder().put(put).build());
    }

    /// An `Update` to commit with the outcome.
    pub fn update(&self, update: Update) {
        self.push(TransactWriteItem::builder().update(update).build());
    }

    /// A `Delete` to commit with the outcome.
    pub fn delete(&self, delete: Delete) {
        self.push(TransactWriteItem::builder().delete(delete).build());
    }

    /// A condition on another item that must hold for the commit to happen (nothing is
    /// written to it); when it does not, the run fails for good with that reason.
    pub fn condition_check(&self, check: ConditionCheck) {
        self.push(TransactWriteItem::builder().condition_check(check).build());
    }

    /// How many writes were handed so far.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when the job handed none (its outcome is then one plain write).
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The writes, checked against the transaction's limits; the list is left empty.
    pub(crate) fn take(&self) -> Result<Vec<TransactWriteItem>, EffectsError> {
        let items = std::mem::take(&mut *self.lock());
        if items.len() > MAX_EFFECTS {
            return Err(EffectsError::TooMany { count: items.len() });
        }
        let bytes: usize = items.iter().map(item_bytes).sum();
        if bytes > MAX_TRANSACTION_BYTES {
            return Err(EffectsError::TooLarge { bytes });
        }
        Ok(items)
    }

    fn push(&self, item: TransactWriteItem) {
        self.lock().push(item);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<TransactWriteItem>> {
        // A job that panicked while holding the lock left a whole list behind.
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The table an effect writes to, for messages.
pub(crate) fn table_of(item: &TransactWriteItem) -> &str {
    item.put
        .as_ref()
        .map(|p| p.table_name.as_str())
        .or(item.update.as_ref().map(|u| u.table_name.as_str()))
        .or(item.delete.as_ref().map(|d| d.table_name.as_str()))
        .or(item.condition_check.as_ref().map(|c| c.table_name.as_str()))
        .unwrap_or("?")
}

/// About how many bytes an effect weighs as DynamoDB counts them (names and values; the
/// expressions' own text is small beside them). Written by hand: the SDK has no size.
fn item_bytes(item: &TransactWriteItem) -> usize {
    let map = crate::store::item_bytes;
    let opt = |m: Option<&HashMap<String, AttributeValue>>| m.map_or(0, map);
    if let Some(p) = &item.put {
        return map(&p.item) + opt(p.expression_attribute_values.as_ref());
    }
    if let Some(u) = &item.update {
        return map(&u.key) + opt(u.expression_attribute_values.as_ref());
    }
    if let Some(d) = &item.delete {
        return map(&d.key) + opt(d.expression_attribute_values.as_ref());
    }
    if let Some(c) = &item.condition_check {
        return map(&c.key) + opt(c.expression_attribute_values.as_ref());
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(table: &str, value: &str) -> Put {
        Put::builder()
            .table_name(table)
            .item("effect_key", AttributeValue::S("k".into()))
            .item("v", AttributeValue::S(value.into()))
            .build()
            .unwrap()
    }

    #[test]
    fn effects_are_shared_by_clones_and_taken_once() {
        let effects = Effects::default();
        effects.clone().put(put("t", "x"));
        assert_eq!(effects.len(), 1);
        let taken = effects.take().unwrap();
        assert_eq!(table_of(&taken[0]), "t");
        assert!(effects.is_empty());
    }

    #[test]
    fn more_than_a_transaction_takes_is_refused_with_the_limit() {
        let effects = Effects::default();
        for _ in 0..100 {
            effects.put(put("t", "x"));
        }
        assert_eq!(
            effects.take().unwrap_err(),
            EffectsError::TooMany { count: 100 }
        );
        let big = "x".repeat(MAX_TRANSACTION_BYTES);
        effects.put(put("t", &big));
        assert!(matches!(effects.take(), Err(EffectsError::TooLarge { .. })));
    }
}
