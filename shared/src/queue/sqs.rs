//! The jobs queue and its dead-letter queue on SQS: one request per call.

use aws_sdk_sqs::Client;
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
    MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName,
};

use super::{Attribute, JobQueue, Outgoing, QueueCall, QueueError};
use crate::aws::describe;
use crate::batch::Delivery;

/// A jobs queue and its DLQ, by URL.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
    dlq_url: String,
}

impl SqsQueue {
    /// The queue `queue_url` with dead letters to `dlq_url`.
    pub fn new(client: Client, queue_url: impl Into<String>, dlq_url: impl Into<String>) -> Self {
        SqsQueue {
            client,
            queue_url: queue_url.into(),
            dlq_url: dlq_url.into(),
        }
    }

    /// The client it was built with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    async fn send_to(&self, url: &str, message: &Outgoing) -> Result<(), QueueError> {
        let mut request = self
            .client
            .send_message()
            .queue_url(url)
            .message_body(&message.body)
            .set_delay_seconds(message.delay_seconds);
        for (name, attribute) in &message.attributes {
            if let Some(value) = to_sdk(attribute) {
                request = request.message_attributes(name, value);
            }
        }
        request
            .send()
            .await
            .map(|_| ())
            .map_err(|e| QueueError(describe(&e)))
    }
}

/// An attribute as the SDK sends it.
fn to_sdk(a: &Attribute) -> Option<MessageAttributeValue> {
    let mut value = MessageAttributeValue::builder().data_type(&a.data_type);
    if let Some(s) = &a.string {
        value = value.string_value(s);
    }
    if let Some(b) = &a.binary {
        value = value.binary_value(Blob::new(b.clone()));
    }
    value.build().ok()
}

impl JobQueue for SqsQueue {
    fn change_visibility<'a>(
        &'a self,
        receipt: &'a str,
        seconds: i32,
    ) -> QueueCall<'a, Result<(), QueueError>> {
        Box::pin(async move {
            self.client
                .change_message_visibility()
                .queue_url(&self.queue_url)
                .receipt_handle(receipt)
                .visibility_timeout(seconds)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| QueueError(describe(&e)))
        })
    }

    fn change_visibility_batch<'a>(
        &'a self,
        entries: &'a [(String, i32)],
    ) -> QueueCall<'a, Result<Vec<String>, QueueError>> {
        Box::pin(async move {
            let request: Vec<_> = entries
                .iter()
                .enumerate()
                .filter_map(|(i, (receipt, seconds))| {
                    ChangeMessageVisibilityBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(receipt)
                        .visibility_timeout(*seconds)
                        .build()
                        .ok()
                })
                .collect();
            let out = self
                .client
                .change_message_visibility_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(request))
                .send()
                .await
                .map_err(|e| QueueError(describe(&e)))?;
            Ok(out
                .failed
                .iter()
                .filter_map(|f| entries.get(f.id.parse::<usize>().ok()?))
                .map(|(receipt, _)| receipt.clone())
                .collect())
        })
    }

    fn send<'a>(&'a self, message: &'a Outgoing) -> QueueCall<'a, Result<(), QueueError>> {
        Box::pin(self.send_to(&self.queue_url, message))
    }

    fn delete<'a>(&'a self, receipt: &'a str) -> QueueCall<'a, Result<(), QueueError>> {
        Box::pin(async move {
            self.client
                .delete_message()
                .queue_url(&self.queue_url)
                .receipt_handle(receipt)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| QueueError(describe(&e)))
        })
    }

    fn dead_letter<'a>(&'a self, letter: &'a Outgoing) -> QueueCall<'a, Result<(), QueueError>> {
        Box::pin(self.send_to(&self.dlq_url, letter))
    }

    /// Every system and message attribute is asked for: the receive count, the trace
    /// header, a redrive's mark and a waiting run's count are read from them.
    fn receive<'a>(
        &'a self,
        most: usize,
        wait_seconds: i32,
        hidden_for: Option<i32>,
    ) -> QueueCall<'a, Result<Vec<Delivery>, QueueError>> {
        Box::pin(async move {
            let out = self
                .client
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(i32::try_from(most.clamp(1, 10)).unwrap_or(10))
                .wait_time_seconds(wait_seconds)
                .set_visibility_timeout(hidden_for)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .message_attribute_names("All")
                .send()
                .await
                .map_err(|e| QueueError(describe(&e)))?;
            Ok(out
                .messages
                .unwrap_or_default()
                .into_iter()
                .map(Delivery::from)
                .collect())
        })
    }

    fn delete_batch<'a>(
        &'a self,
        receipts: &'a [String],
    ) -> QueueCall<'a, Result<u64, QueueError>> {
        Box::pin(async move {
            let entries: Vec<_> = receipts
                .iter()
                .enumerate()
                .filter_map(|(i, receipt)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(receipt)
                        .build()
                        .ok()
                })
                .collect();
            if entries.is_empty() {
                return Ok(0);
            }
            let out = self
                .client
                .delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| QueueError(describe(&e)))?;
            for f in &out.failed {
                // Harmless: the message comes back and is acknowledged as a duplicate.
                tracing::warn!(id = f.id, code = f.code, "delete failed");
            }
            Ok(out.successful.len() as u64)
        })
    }

    /// From the queue's approximate counts: visible, in flight and delayed all zero.
    fn drained<'a>(&'a self) -> QueueCall<'a, Result<bool, QueueError>> {
        Box::pin(async move {
            let counts = [
                QueueAttributeName::ApproximateNumberOfMessages,
                QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
                QueueAttributeName::ApproximateNumberOfMessagesDelayed,
            ];
            let out = self
                .client
                .get_queue_attributes()
                .queue_url(&self.queue_url)
                .set_attribute_names(Some(counts.to_vec()))
                .send()
                .await
                .map_err(|e| QueueError(describe(&e)))?;
            let attrs = out.attributes.unwrap_or_default();
            Ok(counts.iter().all(|c| attrs.get(c).is_none_or(|v| v == "0")))
        })
    }
}
