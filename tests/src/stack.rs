//! A worker's resources on LocalStack: jobs queue, DLQ, executions table, effects table.
//!
//! Until the IaC template deploys them, tests and the demo create them here with the
//! settings the design asks for (DLQ retention 14 days, a redrive policy as safety net,
//! TTL on the executions table).

use std::collections::HashMap;
use std::time::Duration;

use aws_config::SdkConfig;
use aws_lambda_events::event::sqs::SqsMessage;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType, TableStatus, TimeToLiveSpecification,
};
use aws_sdk_sqs::types::{Message, MessageSystemAttributeName, QueueAttributeName};
use schedkit::store::{KEY_ATTRIBUTE, TTL_ATTRIBUTE};
use schedkit::{
    DynamoStore, Envelope, ExecutionRecord, Metrics, Processor, ProcessorConfig, Registry,
};
use schedkit_console::trigger::claims::KEY_ATTRIBUTE as FIRING_KEY;
use schedkit_worker::jobs::EFFECT_KEY;

/// Settings of a stack.
#[derive(Debug, Clone)]
pub struct StackOptions {
    /// Default visibility timeout of the jobs queue, seconds.
    pub visibility_timeout: i32,
    /// The redrive policy's `maxReceiveCount` (the safety net; schedkit dead-letters first).
    pub max_receive_count: u32,
}

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            visibility_timeout: 30,
            max_receive_count: 20,
        }
    }
}

/// Names, URLs and clients of one set of resources.
#[derive(Clone, Debug)]
pub struct Stack {
    pub name: String,
    pub queue_url: String,
    pub dlq_url: String,
    pub table: String,
    pub effects_table: String,
    /// Where EventBridge Scheduler (or the local engine) puts firings it cannot deliver.
    pub schedule_dlq_url: String,
    /// Firing claims shared by local firing engines.
    pub firings_table: String,
    pub sqs: aws_sdk_sqs::Client,
    pub ddb: aws_sdk_dynamodb::Client,
}

impl Stack {
    /// Creates (or reuses, when they exist) the resources named after `name`.
    pub async fn create(
        sdk: &SdkConfig,
        name: &str,
        options: StackOptions,
    ) -> anyhow::Result<Stack> {
        let sqs = aws_sdk_sqs::Client::new(sdk);
        let ddb = aws_sdk_dynamodb::Client::new(sdk);
        let dlq_url = sqs
            .create_queue()
            .queue_name(format!("{name}-dlq"))
            .attributes(
                QueueAttributeName::MessageRetentionPeriod,
                (14 * 24 * 3600).to_string(),
            )
            .send()
            .await?
            .queue_url
            .expect("CreateQueue returns a URL");
        let dlq_arn = queue_arn(&sqs, &dlq_url).await?;
        let redrive = serde_json::json!({
            "deadLetterTargetArn": dlq_arn,
            "maxReceiveCount": options.max_receive_count,
        });
        let queue_url = sqs
            .create_queue()
            .queue_name(format!("{name}-jobs"))
            .attributes(
                QueueAttributeName::VisibilityTimeout,
                options.visibility_timeout.to_string(),
            )
            .attributes(QueueAttributeName::RedrivePolicy, redrive.to_string())
            .send()
            .await?
            .queue_url
            .expect("CreateQueue returns a URL");
        let schedule_dlq_url = sqs
            .create_queue()
            .queue_name(format!("{name}-schedule-dlq"))
            .send()
            .await?
            .queue_url
            .expect("CreateQueue returns a URL");
        let table = format!("{name}-executions");
        let effects_table = format!("{name}-effects");
        let firings_table = format!("{name}-firings");
        create_table(&ddb, &table, KEY_ATTRIBUTE, Some(TTL_ATTRIBUTE)).await?;
        create_table(&ddb, &effects_table, EFFECT_KEY, None).await?;
        create_table(&ddb, &firings_table, FIRING_KEY, Some(TTL_ATTRIBUTE)).await?;
        Ok(Stack {
            name: name.into(),
            queue_url,
            dlq_url,
            table,
            effects_table,
            schedule_dlq_url,
            firings_table,
            sqs,
            ddb,
        })
    }

    /// Deletes the queues and tables (the demo starts from a clean slate).
    pub async fn delete(sdk: &SdkConfig, name: &str) {
        let sqs = aws_sdk_sqs::Client::new(sdk);
        let ddb = aws_sdk_dynamodb::Client::new(sdk);
        for q in [
            format!("{name}-jobs"),
            format!("{name}-dlq"),
            format!("{name}-schedule-dlq"),
        ] {
            if let Ok(out) = sqs.get_queue_url().queue_name(q).send().await {
                let _ = sqs
                    .delete_queue()
                    .queue_url(out.queue_url.unwrap_or_default())
                    .send()
                    .await;
            }
        }
        for t in [
            format!("{name}-executions"),
            format!("{name}-effects"),
            format!("{name}-firings"),
        ] {
            let _ = ddb.delete_table().table_name(t).send().await;
        }
    }

    /// The ARN of one of this stack's queues (LocalStack's account and region).
    pub fn arn_of(&self, queue_url: &str) -> String {
        let name = queue_url.rsplit('/').next().unwrap_or_default();
        format!("arn:aws:sqs:us-east-1:000000000000:{name}")
    }

    pub fn store(&self) -> DynamoStore {
        DynamoStore::new(self.ddb.clone(), &self.table)
    }

    pub fn config(&self, worker_id: &str) -> ProcessorConfig {
        ProcessorConfig {
            queue_url: self.queue_url.clone(),
            dlq_url: self.dlq_url.clone(),
            concurrency: 10,
            worker_id: worker_id.into(),
        }
    }

    /// A processor on this stack with the given jobs.
    pub fn processor(&self, registry: Registry, worker_id: &str, metrics: Metrics) -> Processor {
        Processor::new(
            self.store(),
            self.sqs.clone(),
            registry,
            self.config(worker_id),
            metrics,
        )
    }

    /// The worker's registry (example jobs, catalog policies), writing to this stack's
    /// effects table.
    pub fn example_registry(&self) -> Registry {
        let catalog = schedkit_worker::jobs::catalog().expect("the shipped catalog is valid");
        schedkit_worker::jobs::registry(
            self.ddb.clone(),
            Some(self.effects_table.clone()),
            &catalog,
        )
        .expect("every catalog job is implemented")
    }

    /// Environment for the worker binary (and LocalStack credentials).
    pub fn worker_env(&self) -> Vec<(String, String)> {
        [
            ("SCHEDKIT_QUEUE_URL", self.queue_url.as_str()),
            ("SCHEDKIT_DLQ_URL", self.dlq_url.as_str()),
            ("SCHEDKIT_TABLE", self.table.as_str()),
            ("SCHEDKIT_EFFECTS_TABLE", self.effects_table.as_str()),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain([("AWS_ENDPOINT_URL".to_string(), crate::endpoint())])
        .collect()
    }

    pub async fn send_envelope(&self, envelope: &Envelope) -> anyhow::Result<String> {
        self.send(&envelope.to_json()).await
    }

    /// Sends a raw body; returns the message id.
    pub async fn send(&self, body: &str) -> anyhow::Result<String> {
        let out = self
            .sqs
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .send()
            .await?;
        Ok(out.message_id.unwrap_or_default())
    }

    /// Receives up to `max` messages (several receives if needed), as Lambda would deliver them.
    pub async fn receive(&self, max: usize, wait: Duration) -> anyhow::Result<Vec<SqsMessage>> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut out = Vec::new();
        while out.len() < max && tokio::time::Instant::now() < deadline {
            let got = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages((max - out.len()).min(10) as i32)
                .wait_time_seconds(1)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .send()
                .await?;
            out.extend(
                got.messages
                    .unwrap_or_default()
                    .into_iter()
                    .map(schedkit::poller::to_event_message),
            );
        }
        Ok(out)
    }

    /// Takes every message off the DLQ (with attributes), waiting up to `wait` for the first.
    pub async fn drain_dlq(&self, wait: Duration) -> anyhow::Result<Vec<Message>> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut out: Vec<Message> = Vec::new();
        loop {
            let got = self.dlq_page(if out.is_empty() { 1 } else { 0 }).await?;
            if got.is_empty() && (!out.is_empty() || tokio::time::Instant::now() >= deadline) {
                return Ok(out);
            }
            for m in got {
                self.sqs
                    .delete_message()
                    .queue_url(&self.dlq_url)
                    .receipt_handle(m.receipt_handle.clone().unwrap_or_default())
                    .send()
                    .await?;
                out.push(m);
            }
        }
    }

    /// Every message on the DLQ, left there: received, then made visible again at once.
    pub async fn peek_dlq(&self) -> anyhow::Result<Vec<Message>> {
        let mut out: Vec<Message> = Vec::new();
        loop {
            let got = self.dlq_page(0).await?;
            if got.is_empty() {
                break;
            }
            out.extend(got);
        }
        for m in &out {
            self.sqs
                .change_message_visibility()
                .queue_url(&self.dlq_url)
                .receipt_handle(m.receipt_handle.clone().unwrap_or_default())
                .visibility_timeout(0)
                .send()
                .await?;
        }
        Ok(out)
    }

    /// Up to ten DLQ messages with their attributes, hidden for a minute.
    async fn dlq_page(&self, wait_seconds: i32) -> anyhow::Result<Vec<Message>> {
        Ok(self
            .sqs
            .receive_message()
            .queue_url(&self.dlq_url)
            .max_number_of_messages(10)
            .wait_time_seconds(wait_seconds)
            .visibility_timeout(60)
            .message_attribute_names("All")
            .send()
            .await?
            .messages
            .unwrap_or_default())
    }

    /// (visible, in flight, delayed) messages on a queue.
    pub async fn counts(&self, queue_url: &str) -> anyhow::Result<(u64, u64, u64)> {
        let names = [
            QueueAttributeName::ApproximateNumberOfMessages,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
            QueueAttributeName::ApproximateNumberOfMessagesDelayed,
        ];
        let attrs = self
            .sqs
            .get_queue_attributes()
            .queue_url(queue_url)
            .set_attribute_names(Some(names.to_vec()))
            .send()
            .await?
            .attributes
            .unwrap_or_default();
        let get = |n: &QueueAttributeName| attrs.get(n).and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok((get(&names[0]), get(&names[1]), get(&names[2])))
    }

    pub async fn record(&self, key: &str) -> anyhow::Result<Option<ExecutionRecord>> {
        Ok(self.store().get(key).await?)
    }

    /// Every execution record (a scan; test-sized tables only).
    pub async fn records(&self) -> anyhow::Result<Vec<ExecutionRecord>> {
        let mut out = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let page = self
                .ddb
                .scan()
                .table_name(&self.table)
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await?;
            for item in page.items.unwrap_or_default() {
                out.push(serde_dynamo::from_item(item)?);
            }
            match page.last_evaluated_key {
                Some(k) if !k.is_empty() => start = Some(k),
                _ => return Ok(out),
            }
        }
    }

    /// How many times `record-invoice` applied its write for `key` (0 if never).
    pub async fn effect_applied(&self, key: &str) -> anyhow::Result<i64> {
        let item = self
            .ddb
            .get_item()
            .table_name(&self.effects_table)
            .key(EFFECT_KEY, AttributeValue::S(key.into()))
            .consistent_read(true)
            .send()
            .await?
            .item;
        Ok(item
            .and_then(|i| {
                i.get("applied")
                    .and_then(|v| v.as_n().ok())
                    .and_then(|n| n.parse().ok())
            })
            .unwrap_or(0))
    }
}

async fn queue_arn(sqs: &aws_sdk_sqs::Client, url: &str) -> anyhow::Result<String> {
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await?
        .attributes
        .unwrap_or_default();
    Ok(attrs
        .get(&QueueAttributeName::QueueArn)
        .cloned()
        .unwrap_or_default())
}

async fn create_table(
    ddb: &aws_sdk_dynamodb::Client,
    name: &str,
    key: &str,
    ttl: Option<&str>,
) -> anyhow::Result<()> {
    let created = ddb
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(key)
                .attribute_type(ScalarAttributeType::S)
                .build()?,
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name(key)
                .key_type(KeyType::Hash)
                .build()?,
        )
        .send()
        .await;
    if let Err(e) = created {
        let exists = e
            .as_service_error()
            .is_some_and(|s| s.is_resource_in_use_exception());
        if !exists {
            return Err(e.into());
        }
    }
    for _ in 0..100 {
        let status = ddb
            .describe_table()
            .table_name(name)
            .send()
            .await?
            .table
            .and_then(|t| t.table_status);
        if status == Some(TableStatus::Active) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if let Some(attr) = ttl {
        ddb.update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .enabled(true)
                    .attribute_name(attr)
                    .build()?,
            )
            .send()
            .await
            .ok();
    }
    Ok(())
}

impl Stack {
    /// Runs the processors side by side, each long-polling the jobs queue, until the queue
    /// holds no message at all; returns every report, all processors together.
    pub async fn run_until_drained(&self, processors: &[Processor]) -> schedkit::poller::PollStats {
        let options = schedkit::poller::PollOptions {
            wait_seconds: 1,
            max_messages: 10,
            until_drained: true,
        };
        let runs = processors
            .iter()
            .map(|p| schedkit::poller::poll(p, &self.sqs, &options, std::future::pending()));
        let mut all = schedkit::poller::PollStats::default();
        for stats in futures::future::join_all(runs).await {
            all.received += stats.received;
            all.deleted += stats.deleted;
            for (k, v) in stats.outcomes {
                *all.outcomes.entry(k).or_default() += v;
            }
            all.reports.extend(stats.reports);
        }
        all
    }
}
