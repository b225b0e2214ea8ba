//! Many items by key at once (`BatchGetItem`, a hundred keys a request): how the
//! accountant finds the runs of a check's expected firings, however many jobs fired,
//! without a request per job, and how a worker looks at every gate its runs watch in one
//! request, however many limits they wait for.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};

use super::ExecutionRecord;
use super::dynamo::{DynamoStore, KEY_ATTRIBUTE, StoreError, decode, unavailable};
use super::gate_item::{GateItem, gate_item};

/// Keys one `BatchGetItem` takes at most (DynamoDB's limit).
const KEYS_PER_REQUEST: usize = 100;
/// Requests in flight at once.
const AT_ONCE: usize = 4;
/// Rounds of keys DynamoDB left unprocessed (throttled) before the read gives up.
const ROUNDS: u32 = 8;

impl DynamoStore {
    /// The records of `keys` that exist (strongly consistent), by key, and the requests made.
    pub async fn get_many(
        &self,
        keys: impl IntoIterator<Item = String>,
    ) -> Result<(HashMap<String, ExecutionRecord>, usize), StoreError> {
        let keys: Vec<String> = keys
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut found = HashMap::new();
        let mut requests = 0;
        let mut reads = tokio::task::JoinSet::new();
        let mut chunks = keys.chunks(KEYS_PER_REQUEST).map(<[String]>::to_vec);
        loop {
            while reads.len() < AT_ONCE {
                let Some(chunk) = chunks.next() else { break };
                let store = self.clone();
                reads.spawn(async move { store.get_chunk(chunk).await });
            }
            let Some(read) = reads.join_next().await else {
                break;
            };
            let (records, made) = read.expect("a read task does not panic")?;
            requests += made;
            found.extend(records);
        }
        Ok((found, requests))
    }

    /// The gates `items` as they are now (strongly consistent), a gate never written as an
    /// empty one: a hundred to a request.
    pub async fn read_gates(
        &self,
        items: &[String],
    ) -> Result<BTreeMap<String, GateItem>, StoreError> {
        let mut gates: BTreeMap<String, GateItem> = items
            .iter()
            .map(|item| (item.clone(), GateItem::default()))
            .collect();
        let wanted: Vec<String> = gates.keys().cloned().collect();
        for chunk in wanted.chunks(KEYS_PER_REQUEST) {
            for (key, item) in self.get_items(chunk).await?.0 {
                gates.insert(key, gate_item(&item));
            }
        }
        Ok(gates)
    }

    /// At most [`KEYS_PER_REQUEST`] keys, asking again for what DynamoDB left unprocessed.
    async fn get_chunk(
        &self,
        keys: Vec<String>,
    ) -> Result<(Vec<(String, ExecutionRecord)>, usize), StoreError> {
        let (items, requests) = self.get_items(&keys).await?;
        let records = items
            .into_iter()
            .map(|(key, item)| Ok((key.clone(), decode(&key, item)?)))
            .collect::<Result<_, StoreError>>()?;
        Ok((records, requests))
    }

    /// The items of at most [`KEYS_PER_REQUEST`] keys that exist, as DynamoDB holds them
    /// (strongly consistent), asking again for what it left unprocessed; and the requests
    /// made.
    pub(super) async fn get_items(
        &self,
        keys: &[String],
    ) -> Result<(Vec<(String, HashMap<String, AttributeValue>)>, usize), StoreError> {
        let mut wanted: Vec<HashMap<String, AttributeValue>> = keys
            .iter()
            .map(|k| HashMap::from([(KEY_ATTRIBUTE.to_string(), AttributeValue::S(k.clone()))]))
            .collect();
        let mut items = Vec::new();
        let mut requests = 0;
        for round in 0..ROUNDS {
            if wanted.is_empty() {
                break;
            }
            if round > 0 {
                tokio::time::sleep(Duration::from_millis(50 << round)).await;
            }
            let request = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut wanted)))
                .consistent_read(true)
                .build()
                .expect("keys are set");
            let call = self
                .client
                .batch_get_item()
                .request_items(&self.table, request)
                .send();
            let out = self.timed(call).await?.map_err(unavailable)?;
            requests += 1;
            for item in out
                .responses
                .unwrap_or_default()
                .remove(&self.table)
                .unwrap_or_default()
            {
                let Some(AttributeValue::S(key)) = item.get(KEY_ATTRIBUTE).cloned() else {
                    continue;
                };
                items.push((key, item));
            }
            if let Some(left) = out.unprocessed_keys.and_then(|mut u| u.remove(&self.table)) {
                wanted = left.keys;
            }
        }
        if !wanted.is_empty() {
            return Err(StoreError::Unavailable(format!(
                "{} items were still unprocessed after {ROUNDS} rounds of BatchGetItem (throttled)",
                wanted.len()
            )));
        }
        Ok((items, requests))
    }
}
