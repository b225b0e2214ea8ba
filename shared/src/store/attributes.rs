//! How schedkit's values are written as DynamoDB attributes: the helpers every request
//! builder shares, and the item of an execution record. Its own module so the conditions,
//! which read items, and the store, which sends them, both depend on it and not on each other.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::list_shard;
use super::record::{ExecutionRecord, Status};

/// An item as DynamoDB holds it.
pub type Item = HashMap<String, AttributeValue>;

/// The item the store writes for `record`: its attributes, its listing shard (the
/// `by-shard` index) and, unless DONE or SKIPPED, its open status (the sparse
/// `open-by-status` index). Public for tools that write records as the store would (the
/// benchmark fills a table with them).
pub fn record_item(record: &ExecutionRecord) -> Item {
    let mut item: Item = serde_dynamo::to_item(record).expect("a record serialises");
    item.insert("list_shard".into(), s(&list_shard(&record.execution_key)));
    if !matches!(record.status, Status::Done | Status::Skipped) {
        item.insert("open_status".into(), s(record.status.as_str()));
    }
    item
}

/// A string attribute.
pub(super) fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

/// A number attribute.
pub(super) fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// About how many bytes an item weighs as DynamoDB counts them against its 400 KB item
/// limit and the transaction limit: each attribute's name and value. Written by hand: the
/// SDK has no size.
pub fn item_bytes(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_bytes(v)).sum()
}

fn value_bytes(v: &AttributeValue) -> usize {
    match v {
        AttributeValue::S(s) | AttributeValue::N(s) => s.len(),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Ss(l) | AttributeValue::Ns(l) => l.iter().map(String::len).sum(),
        AttributeValue::Bs(l) => l.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(l) => l.iter().map(value_bytes).sum::<usize>() + 3,
        AttributeValue::M(m) => item_bytes(m) + 3,
        _ => 1,
    }
}
