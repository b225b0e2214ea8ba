//! The jobs queue, its urgent queue and its dead-letter queue on SQS: one request per
//! call, or one per queue when a batch holds receipts of both.

use aws_sdk_sqs::Client;
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
    MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName,
};

use super::urgent::{absent, queue_name, tagged, untagged, urgent_queue_of};
use super::{Attribute, JobQueue, Outgoing, QueueCall, QueueError};
use crate::aws::describe;
use crate::batch::Delivery;

/// A jobs queue, the urgent queue beside it and their DLQ, by URL.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
    urgent_url: String,
    dlq_url: String,
}

impl SqsQueue {
    /// The queue `queue_url`, the urgent queue beside it (see [`super::urgent`]), with dead
    /// letters to `dlq_url`.
    pub fn new(client: Client, queue_url: impl Into<String>, dlq_url: impl Into<String>) -> Self {
        let queue_url = queue_url.into();
        SqsQueue {
            client,
            urgent_url: urgent_queue_of(&queue_url),
            queue_url,
            dlq_url: dlq_url.into(),
        }
    }

    /// The queue a receipt came from, and the receipt as that queue knows it.
    fn of<'a>(&'a self, receipt: &'a str) -> (&'a str, &'a str) {
        match untagged(receipt) {
            (true, r) => (&self.urgent_url, r),
            (false, r) => (&self.queue_url, r),
        }
    }

    /// `items`' receipts by the queue they came from (the jobs queue's first), with their
    /// indexes, at most ten to a group.
    fn by_queue<'a, T>(
        &'a self,
        items: &'a [T],
        receipt: impl Fn(&T) -> &str,
    ) -> Vec<(&'a str, Vec<(usize, &'a str)>)> {
        let mut main = Vec::new();
        let mut urgent = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match untagged(receipt(item)) {
                (true, r) => urgent.push((i, r)),
                (false, r) => main.push((i, r)),
            }
        }
        // Ten to a request, SQS's most: a Lambda batch may hold up to a hundred.
        [(self.queue_url.as_str(), main), (&self.urgent_url, urgent)]
            .into_iter()
            .flat_map(|(url, group)| {
                let tens: Vec<_> = group.chunks(10).map(<[_]>::to_vec).collect();
                tens.into_iter().map(move |ten| (url, ten))
            })
            .collect()
    }

    async fn receive_from(
        &self,
        url: &str,
        most: usize,
        wait_seconds: i32,
        hidden_for: Option<i32>,
    ) -> Result<Vec<Delivery>, QueueError> {
        let out = self
            .client
            .receive_message()
            .queue_url(url)
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
    }

    /// Whether `queue_url` holds no message: visible, in flight and delayed all zero (an
    /// urgent queue that is not there holds none).
    async fn empty(&self, url: &str) -> Result<bool, QueueError> {
        let counts = [
            QueueAttributeName::ApproximateNumberOfMessages,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
            QueueAttributeName::ApproximateNumberOfMessagesDelayed,
        ];
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(url)
            .set_attribute_names(Some(counts.to_vec()))
            .send()
            .await;
        let out = match out {
            Ok(out) => out,
            Err(e) if url == self.urgent_url && absent(&describe(&e)) => return Ok(true),
            Err(e) => return Err(QueueError(describe(&e))),
        };
        let attrs = out.attributes.unwrap_or_default();
        Ok(counts.iter().all(|c| attrs.get(c).is_none_or(|v| v == "0")))
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
            .set_delay_seconds(message.delay_seconds)
            .set_message_group_id(message.group.clone());
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
            let (url, receipt) = self.of(receipt);
            self.client
                .change_message_visibility()
                .queue_url(url)
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
            let mut failed = Vec::new();
            for (url, group) in self.by_queue(entries, |(r, _)| r) {
                let request: Vec<_> = group
                    .iter()
                    .filter_map(|&(i, receipt)| {
                        ChangeMessageVisibilityBatchRequestEntry::builder()
                            .id(i.to_string())
                            .receipt_handle(receipt)
                            .visibility_timeout(entries[i].1)
                            .build()
                            .ok()
                    })
                    .collect();
                let out = self
                    .client
                    .change_message_visibility_batch()
                    .queue_url(url)
                    .set_entries(Some(request))
                    .send()
                    .await
                    .map_err(|e| QueueError(describe(&e)))?;
                failed.extend(
                    out.failed
                        .iter()
                        .filter_map(|f| entries.get(f.id.parse::<usize>().ok()?))
                        .map(|(receipt, _)| receipt.clone()),
                );
            }
            Ok(failed)
        })
    }

    fn send<'a>(&'a self, message: &'a Outgoing) -> QueueCall<'a, Result<(), QueueError>> {
        Box::pin(self.send_to(&self.queue_url, message))
    }

    fn send_again<'a>(
        &'a self,
        receipt: Option<&'a str>,
        message: &'a Outgoing,
    ) -> QueueCall<'a, Result<(), QueueError>> {
        let url = receipt.map_or(self.queue_url.as_str(), |r| self.of(r).0);
        Box::pin(self.send_to(url, message))
    }

    fn delete<'a>(&'a self, receipt: &'a str) -> QueueCall<'a, Result<(), QueueError>> {
        Box::pin(async move {
            let (url, receipt) = self.of(receipt);
            self.client
                .delete_message()
                .queue_url(url)
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
        Box::pin(self.receive_from(&self.queue_url, most, wait_seconds, hidden_for))
    }

    /// As [`JobQueue::receive`], from the urgent queue, its receipts tagged. A stage
    /// without one answers an error the poller knows ([`super::urgent::absent`]).
    fn receive_urgent<'a>(
        &'a self,
        most: usize,
        wait_seconds: i32,
        hidden_for: Option<i32>,
    ) -> Option<QueueCall<'a, Result<Vec<Delivery>, QueueError>>> {
        Some(Box::pin(async move {
            let mut deliveries = self
                .receive_from(&self.urgent_url, most, wait_seconds, hidden_for)
                .await?;
            for d in &mut deliveries {
                d.receipt_handle = d.receipt_handle.as_deref().map(tagged);
            }
            Ok(deliveries)
        }))
    }

    /// Tags the receipt of a copy Lambda's event source received from the urgent queue.
    fn adopt(&self, delivery: &mut Delivery) {
        let from_urgent = delivery
            .source_queue
            .as_deref()
            .is_some_and(|s| queue_name(s) == queue_name(&self.urgent_url));
        if from_urgent {
            delivery.receipt_handle = delivery.receipt_handle.as_deref().map(tagged);
        }
    }

    fn delete_batch<'a>(
        &'a self,
        receipts: &'a [String],
    ) -> QueueCall<'a, Result<u64, QueueError>> {
        Box::pin(async move {
            let mut deleted = 0;
            for (url, group) in self.by_queue(receipts, String::as_str) {
                let entries: Vec<_> = group
                    .iter()
                    .filter_map(|&(i, receipt)| {
                        DeleteMessageBatchRequestEntry::builder()
                            .id(i.to_string())
                            .receipt_handle(receipt)
                            .build()
                            .ok()
                    })
                    .collect();
                let out = self
                    .client
                    .delete_message_batch()
                    .queue_url(url)
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .map_err(|e| QueueError(describe(&e)))?;
                for f in &out.failed {
                    // Harmless: the message comes back and is acknowledged as a duplicate.
                    tracing::warn!(id = f.id, code = f.code, "delete failed");
                }
                deleted += out.successful.len() as u64;
            }
            Ok(deleted)
        })
    }

    /// From the queues' approximate counts: visible, in flight and delayed all zero, in
    /// the jobs queue and the urgent one.
    fn drained<'a>(&'a self) -> QueueCall<'a, Result<bool, QueueError>> {
        Box::pin(async move {
            Ok(self.empty(&self.queue_url).await? && self.empty(&self.urgent_url).await?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> SqsQueue {
        let config = aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new("eu-west-1"))
            .build();
        SqsQueue::new(
            Client::from_conf(config),
            "https://sqs.eu-west-1.amazonaws.com/1/schedkit-prod-jobs",
            "https://sqs.eu-west-1.amazonaws.com/1/schedkit-prod-dlq",
        )
    }

    fn from(source: Option<&str>) -> Delivery {
        Delivery {
            receipt_handle: Some("AQEB+r/==".into()),
            source_queue: source.map(str::to_string),
            ..Delivery::default()
        }
    }

    #[test]
    fn a_copy_lambda_received_from_the_urgent_queue_is_tagged_and_routed_back_there() {
        let q = queue();
        let mut urgent = from(Some("arn:aws:sqs:eu-west-1:1:schedkit-prod-jobs-urgent"));
        q.adopt(&mut urgent);
        let receipt = urgent.receipt_handle.unwrap();
        assert_eq!(
            q.of(&receipt),
            (
                "https://sqs.eu-west-1.amazonaws.com/1/schedkit-prod-jobs-urgent",
                "AQEB+r/=="
            )
        );
        for source in [Some("arn:aws:sqs:eu-west-1:1:schedkit-prod-jobs"), None] {
            let mut copy = from(source);
            q.adopt(&mut copy);
            let receipt = copy.receipt_handle.unwrap();
            assert_eq!(
                q.of(&receipt),
                (
                    "https://sqs.eu-west-1.amazonaws.com/1/schedkit-prod-jobs",
                    "AQEB+r/=="
                )
            );
        }
    }

    #[test]
    fn a_batch_of_a_hundred_goes_ten_to_a_request() {
        let q = queue();
        let receipts: Vec<String> = (0..25).map(|i| format!("r{i}")).collect();
        let groups = q.by_queue(&receipts, String::as_str);
        let sizes: Vec<usize> = groups.iter().map(|(_, g)| g.len()).collect();
        assert_eq!(sizes, vec![10, 10, 5]);
        assert_eq!(groups[2].1[4], (24, "r24"));
    }

    #[test]
    fn a_batch_of_both_queues_receipts_is_split_by_queue_keeping_each_index() {
        let q = queue();
        let receipts = vec!["a".to_string(), tagged("b"), "c".to_string(), tagged("d")];
        let groups = q.by_queue(&receipts, String::as_str);
        assert_eq!(
            groups,
            vec![
                (
                    "https://sqs.eu-west-1.amazonaws.com/1/schedkit-prod-jobs",
                    vec![(0, "a"), (2, "c")]
                ),
                (
                    "https://sqs.eu-west-1.amazonaws.com/1/schedkit-prod-jobs-urgent",
                    vec![(1, "b"), (3, "d")]
                ),
            ]
        );
    }
}
