//! Records written straight into a stage's table, as the worker would have left them: for
//! the sections that measure reading a table of a given size (the accountant, the web
//! page), without running thousands of jobs first.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use chrono::Utc;
use schedkit::store::{ClaimOutcome, ClaimRequest, Finish};
use schedkit::{DynamoStore, ExecutionRecord};
use schedkit_testkit::Stack;

/// A DONE record, as the worker writes one: claimed and finished through the store (a
/// template the callers copy under other keys).
pub async fn done_record(store: &DynamoStore) -> anyhow::Result<ExecutionRecord> {
    let now = Utc::now();
    let claim = ClaimRequest {
        key: "bench-template".into(),
        job: "template".into(),
        scheduled_for: now.to_rfc3339(),
        payload_hash: "h".into(),
        input: "{}".into(),
        message_id: None,
        owner: "bench:1".into(),
        now,
        lease: Duration::from_secs(60),
        retention: Duration::from_secs(30 * 86_400),
        redrive: None,
    };
    let ClaimOutcome::Claimed { record, .. } = store.claim(&claim).await? else {
        anyhow::bail!("the template record was not claimed");
    };
    let finish = Finish::Succeeded {
        result: serde_json::json!({"rows": 1}),
    };
    store.finish(&record, &finish, now).await?;
    store
        .get("bench-template")
        .await?
        .ok_or_else(|| anyhow::anyhow!("the template record is gone"))
}

/// Writes `records` into the stage's table, 25 to a BatchWriteItem, 8 batches at once.
pub async fn put_records(
    stack: &Stack,
    records: impl IntoIterator<Item = ExecutionRecord>,
) -> anyhow::Result<usize> {
    // As the store writes them: with the attributes its indexes are keyed on.
    let items: Vec<HashMap<String, AttributeValue>> = records
        .into_iter()
        .map(|r| schedkit::store::record_item(&r))
        .collect();
    let mut writes = tokio::task::JoinSet::new();
    for chunk in items.chunks(25) {
        let requests: Vec<WriteRequest> = chunk
            .iter()
            .map(|item| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .set_item(Some(item.clone()))
                            .build()
                            .expect("an item"),
                    )
                    .build()
            })
            .collect();
        let (ddb, table) = (stack.ddb.clone(), stack.table.clone());
        writes.spawn(async move {
            let mut pending = requests;
            while !pending.is_empty() {
                let out = ddb
                    .batch_write_item()
                    .request_items(&table, pending)
                    .send()
                    .await?;
                pending = out
                    .unprocessed_items
                    .and_then(|mut u| u.remove(&table))
                    .unwrap_or_default();
            }
            anyhow::Ok(())
        });
        if writes.len() >= 8
            && let Some(done) = writes.join_next().await
        {
            done??;
        }
    }
    while let Some(done) = writes.join_next().await {
        done??;
    }
    Ok(items.len())
}
