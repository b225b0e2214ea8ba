//! Records written straight into a stage's table, and letters straight onto its DLQ, as
//! the worker would have left them: for the sections that measure reading a stage of a
//! given size (the redrive, the accountant, the web page), without running thousands of
//! jobs first.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
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

/// Puts `letters` (a body, and the reason schedkit's worker would have written, if any) on
/// the stage's DLQ, ten to a SendMessageBatch.
pub async fn dead_letters(
    stack: &Stack,
    letters: impl IntoIterator<Item = (String, Option<&str>)>,
) -> anyhow::Result<()> {
    let letters: Vec<(String, Option<&str>)> = letters.into_iter().collect();
    for chunk in letters.chunks(10) {
        let mut entries = Vec::with_capacity(chunk.len());
        for (i, (body, reason)) in chunk.iter().enumerate() {
            let mut entry = SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(body);
            if let Some(reason) = reason {
                entry = entry.message_attributes(
                    schedkit::dead_letter::attr::REASON,
                    MessageAttributeValue::builder()
                        .data_type("String")
                        .string_value(*reason)
                        .build()?,
                );
            }
            entries.push(entry.build()?);
        }
        stack
            .sqs
            .send_message_batch()
            .queue_url(&stack.dlq_url)
            .set_entries(Some(entries))
            .send()
            .await?;
    }
    Ok(())
}
