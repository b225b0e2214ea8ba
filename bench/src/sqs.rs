//! What the benchmarks' harnesses do to queues as Lambda's event source mapping would.

use schedkit_testkit::Stack;

/// Deletes received messages from the jobs queue by their receipts, ten to a request.
pub async fn delete_received(stack: &Stack, receipts: &[String]) -> anyhow::Result<()> {
    for chunk in receipts.chunks(10) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, r)| {
                aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(r)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        stack
            .sqs
            .delete_message_batch()
            .queue_url(&stack.queue_url)
            .set_entries(Some(entries))
            .send()
            .await?;
    }
    Ok(())
}
