//! Every record of a stage, newest first across pages: the `by-shard` index spreads the
//! records over [`LIST_SHARDS`] partitions (so no partition key gathers them all); a page
//! reads the next records of each partition, newest first, and merges them. The page token
//! says, per partition, where its next read starts, so the pages together are in order and
//! hold each record once.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::OpsError;
use crate::aws::AwsResultExt;
use crate::store::LIST_SHARDS;
use crate::store::Status;

type Item = HashMap<String, AttributeValue>;

/// Where each partition's next read starts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(super) struct Cursor {
    /// Per partition, the index key to read after (absent: from its newest record).
    after: BTreeMap<String, BTreeMap<String, String>>,
    /// Partitions read to their end.
    done: Vec<String>,
}

/// What one partition's read returned.
#[derive(Debug, Clone)]
pub(super) struct ShardPage {
    shard: String,
    items: Vec<Item>,
    /// DynamoDB's `LastEvaluatedKey`: None when the partition has nothing more.
    last_evaluated: Option<Item>,
}

/// The time a record sorts by.
fn updated_at(item: &Item) -> &str {
    item.get("updated_at")
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        .unwrap_or_default()
}

/// The `by-shard` index key of an item (what a read can start after).
fn index_key(item: &Item) -> BTreeMap<String, String> {
    ["execution_key", "list_shard", "updated_at"]
        .iter()
        .filter_map(|k| {
            item.get(*k)
                .and_then(|v| v.as_s().ok())
                .map(|v| (k.to_string(), v.clone()))
        })
        .collect()
}

fn plain(key: &Item) -> BTreeMap<String, String> {
    key.iter()
        .filter_map(|(k, v)| v.as_s().ok().map(|s| (k.clone(), s.clone())))
        .collect()
}

/// Takes the newest `limit` items of the partitions' pages and the cursor of what follows;
/// None when nothing does.
pub(super) fn merge(
    mut pages: Vec<ShardPage>,
    limit: usize,
    mut cursor: Cursor,
) -> (Vec<Item>, Option<Cursor>) {
    let mut taken_from: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::with_capacity(limit);
    while out.len() < limit {
        let Some(best) = pages
            .iter()
            .enumerate()
            .filter(|(_, p)| taken_from.get(&p.shard).copied().unwrap_or(0) < p.items.len())
            .max_by(|(_, a), (_, b)| {
                let next = |p: &ShardPage| {
                    updated_at(&p.items[taken_from.get(&p.shard).copied().unwrap_or(0)]).to_string()
                };
                next(a).cmp(&next(b))
            })
            .map(|(i, _)| i)
        else {
            break;
        };
        let page = &pages[best];
        let n = taken_from.entry(page.shard.clone()).or_default();
        out.push(page.items[*n].clone());
        *n += 1;
    }
    for page in pages.iter_mut() {
        let taken = taken_from.get(&page.shard).copied().unwrap_or(0);
        if taken < page.items.len() {
            if taken > 0 {
                cursor
                    .after
                    .insert(page.shard.clone(), index_key(&page.items[taken - 1]));
            }
        } else if let Some(last) = &page.last_evaluated {
            // All it returned was taken (or filtered out): go on after what it read.
            cursor.after.insert(page.shard.clone(), plain(last));
        } else {
            cursor.after.remove(&page.shard);
            cursor.done.push(page.shard.clone());
        }
    }
    cursor.done.sort();
    cursor.done.dedup();
    let finished = cursor.done.len() as u64 >= LIST_SHARDS;
    (out, (!finished).then_some(cursor))
}

/// One page of every record (only those in `status`, when given), newest first by
/// `updated_at` between `since` and `until` (RFC 3339 text bounds).
pub(super) async fn page(
    ddb: &Client,
    table: &str,
    status: Option<Status>,
    (since, until): (String, String),
    limit: i32,
    token: Option<&str>,
) -> Result<(Vec<Item>, Option<String>), OpsError> {
    let cursor = token.map(decode).transpose()?.unwrap_or_default();
    let mut reads = tokio::task::JoinSet::new();
    for shard in (0..LIST_SHARDS).map(|s| s.to_string()) {
        if cursor.done.contains(&shard) {
            continue;
        }
        let start: Option<Item> = cursor.after.get(&shard).map(|k| {
            k.iter()
                .map(|(k, v)| (k.clone(), AttributeValue::S(v.clone())))
                .collect()
        });
        let mut q = ddb
            .query()
            .table_name(table)
            .index_name("by-shard")
            .key_condition_expression("#shard = :shard AND #t BETWEEN :since AND :until")
            .expression_attribute_names("#shard", "list_shard")
            .expression_attribute_names("#t", "updated_at")
            .expression_attribute_values(":shard", AttributeValue::S(shard.clone()))
            .expression_attribute_values(":since", AttributeValue::S(since.clone()))
            .expression_attribute_values(":until", AttributeValue::S(until.clone()))
            .scan_index_forward(false)
            .limit(limit)
            .set_exclusive_start_key(start);
        if let Some(s) = status {
            q = q
                .filter_expression("#s = :s")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":s", AttributeValue::S(s.as_str().into()));
        }
        let what = format!("querying {table} by shard");
        reads.spawn(async move {
            let out = q.send().await.aws(what)?;
            Ok::<_, OpsError>(ShardPage {
                shard,
                items: out.items.unwrap_or_default(),
                last_evaluated: out.last_evaluated_key.filter(|k| !k.is_empty()),
            })
        });
    }
    let mut pages = Vec::new();
    while let Some(joined) = reads.join_next().await {
        pages.push(joined.expect("a shard read does not panic")?);
    }
    pages.sort_by(|a, b| a.shard.cmp(&b.shard));
    let (items, next) = merge(pages, limit.max(0) as usize, cursor);
    Ok((items, next.map(|c| encode(&c))))
}

fn encode(cursor: &Cursor) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(cursor).expect("a cursor serialises"))
}

fn decode(token: &str) -> Result<Cursor, OpsError> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| OpsError::BadPageToken)?;
    serde_json::from_slice(&bytes).map_err(|_| OpsError::BadPageToken)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: &str, shard: &str, at: &str) -> Item {
        [
            ("execution_key", key),
            ("list_shard", shard),
            ("updated_at", at),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), AttributeValue::S(v.to_string())))
        .collect()
    }

    /// A fake table of `LIST_SHARDS` partitions, read as the index would (newest first,
    /// `limit` per read, after the cursor's key).
    fn read(table: &[Item], cursor: &Cursor, limit: usize) -> Vec<ShardPage> {
        (0..LIST_SHARDS)
            .map(|s| s.to_string())
            .filter(|s| !cursor.done.contains(s))
            .map(|shard| {
                let mut rows: Vec<&Item> = table
                    .iter()
                    .filter(|i| i["list_shard"].as_s().unwrap() == &shard)
                    .collect();
                rows.sort_by(|a, b| updated_at(b).cmp(updated_at(a)));
                if let Some(after) = cursor.after.get(&shard) {
                    let at = &after["updated_at"];
                    rows.retain(|i| updated_at(i) < at.as_str());
                }
                let more = rows.len() > limit;
                let items: Vec<Item> = rows.into_iter().take(limit).cloned().collect();
                let last_evaluated = more.then(|| items.last().unwrap().clone());
                ShardPage {
                    shard,
                    items,
                    last_evaluated,
                }
            })
            .collect()
    }

    #[test]
    fn pages_are_newest_first_across_partitions_and_hold_each_record_once() {
        let table: Vec<Item> = (0..53)
            .map(|i| {
                let shard = ((i * 7 + i / 3) % LIST_SHARDS as usize).to_string();
                item(
                    &format!("k{i}"),
                    &shard,
                    &format!("2026-12-01T10:{:02}:00.000Z", i),
                )
            })
            .collect();
        let mut seen = Vec::new();
        let mut cursor = Cursor::default();
        let mut pages = 0;
        loop {
            let (items, next) = merge(read(&table, &cursor, 5), 5, cursor.clone());
            pages += 1;
            assert!(items.len() <= 5);
            seen.extend(items.iter().map(|i| updated_at(i).to_string()));
            match next {
                Some(c) => cursor = decode(&encode(&c)).unwrap(),
                None => break,
            }
            assert!(pages < 40, "no end");
        }
        let mut sorted = seen.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        assert_eq!(seen, sorted, "newest first across pages");
        sorted.dedup();
        assert_eq!(sorted.len(), 53, "each record once");
    }

    #[test]
    fn a_bad_token_is_refused() {
        assert!(decode("!!").is_err());
        assert!(decode("e30").is_ok(), "`{{}}` is an empty cursor");
    }
}
