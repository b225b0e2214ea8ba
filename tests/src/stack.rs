//! schedkit's stack on LocalStack, deployed from `infra/template.yaml` (one CloudFormation
//! stack per test, so tests run in parallel without seeing each other's messages; or a lane
//! of one stage shared by a test binary, its own queues and tables beside the stage's
//! functions and schedule group, for tests that drive workers themselves), and the helpers
//! tests and the demo use on it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use aws_config::SdkConfig;
use aws_lambda_events::event::sqs::SqsMessage;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::{Message, MessageSystemAttributeName, QueueAttributeName};
use schedkit::batch::AutoPause;
use schedkit::queue::urgent::urgent_queue_of;
use schedkit::{
    DynamoStore, Envelope, ExecutionRecord, Metrics, Processor, ProcessorConfig, Registry,
};
use schedkit_worker::jobs::EFFECT_KEY;

use crate::lane_tables::TableShape;
use serde::Deserialize;

/// Settings of a test's stack.
#[derive(Debug, Clone, Default)]
pub struct StackOptions {
    /// The jobs queue's visibility timeout, seconds (the template's is 6 x the worker's
    /// timeout; tests that wait for redeliveries shorten it).
    pub visibility_timeout: Option<i32>,
    /// The redrive policy's `maxReceiveCount` (the template derives it from the catalog).
    pub max_receive_count: Option<u32>,
    /// Whether the deployed worker Lambda consumes the jobs queue. Off by default: most
    /// tests drive workers themselves.
    pub worker_event_source: bool,
    /// Another worker: its template (written by `schedkit iac init`) and its packaged zip
    /// (default: `infra/template.yaml` with the example worker).
    pub worker: Option<WorkerBuild>,
}

/// A worker crate of one's own, as deployed: the template and the zip of its bootstrap.
#[derive(Debug, Clone)]
pub struct WorkerBuild {
    pub template: PathBuf,
    pub zip: PathBuf,
}

impl WorkerBuild {
    /// The example worker: `infra/template.yaml` with `functions/package.sh worker`'s zip.
    pub fn example() -> WorkerBuild {
        WorkerBuild {
            template: crate::root().join("infra/template.yaml"),
            zip: crate::target_dir().join("lambda/debug/worker.zip"),
        }
    }
}

/// What `infra/deploy-localstack.sh` reports.
#[derive(Debug, Clone, Deserialize)]
pub struct Deployment {
    pub stack: String,
    pub status: String,
    #[serde(default)]
    pub changed: bool,
    #[serde(default)]
    pub outputs: HashMap<String, String>,
}

/// The CloudFormation stack name of a stage.
pub fn stack_name(stage: &str) -> String {
    format!("schedkit-{stage}")
}

/// Runs the project's deploy command for `stage` with template parameters `params`.
pub async fn deploy(stage: &str, params: &[(&str, &str)]) -> anyhow::Result<Deployment> {
    deploy_worker(stage, &WorkerBuild::example(), params).await
}

/// [`deploy`] of another worker's template and zip.
pub async fn deploy_worker(
    stage: &str,
    worker: &WorkerBuild,
    params: &[(&str, &str)],
) -> anyhow::Result<Deployment> {
    let mut args = vec![
        "--stack".to_string(),
        stack_name(stage),
        "--template".to_string(),
        worker.template.display().to_string(),
        format!("Stage={stage}"),
    ];
    args.extend(params.iter().map(|(k, v)| format!("{k}={v}")));
    run_deploy_script(&args, &worker.zip).await
}

/// Deletes the stage's stack and waits until it is gone.
pub async fn undeploy(stage: &str) -> anyhow::Result<()> {
    undeploy_with(stage, &WorkerBuild::example().zip).await
}

/// [`undeploy`] for a stage deployed with another worker's zip (the deploy script wants
/// one at hand even to delete; the benchmark's stages have the release zip, not the debug).
pub async fn undeploy_with(stage: &str, zip: &std::path::Path) -> anyhow::Result<()> {
    let args = ["--stack".into(), stack_name(stage), "--delete".into()];
    run_deploy_script(&args, zip).await?;
    Ok(())
}

async fn run_deploy_script(args: &[String], zip: &std::path::Path) -> anyhow::Result<Deployment> {
    let root = crate::root();
    anyhow::ensure!(
        zip.exists(),
        "{} is missing: package it with `functions/package.sh` (`make build` packages every worker)",
        zip.display()
    );
    let out = tokio::process::Command::new(root.join("infra/deploy-localstack.sh"))
        .args(args)
        .env("AWS_ENDPOINT_URL", crate::endpoint())
        // Never build from inside `cargo test`: deploy the zip that is already there.
        .env("SCHEDKIT_WORKER_ZIP", zip)
        .output()
        .await
        .context("running infra/deploy-localstack.sh")?;
    anyhow::ensure!(
        out.status.success(),
        "deploy {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).context("reading the deploy summary")
}

/// A deployed stage: the names and URLs of its outputs, and clients.
#[derive(Clone, Debug)]
pub struct Stack {
    /// The stage (every resource name carries it).
    pub name: String,
    pub queue_url: String,
    pub dlq_url: String,
    pub table: String,
    pub effects_table: String,
    /// Where EventBridge Scheduler (or the local engine) puts firings it cannot deliver.
    pub schedule_dlq_url: String,
    /// Firing claims shared by local firing engines.
    pub firings_table: String,
    pub schedule_group: String,
    pub scheduler_role_arn: String,
    pub worker_function: String,
    /// A lane of the shared stage (its own queues and tables, none of the stage's
    /// policies): see [`Stack::lane`].
    pub lane: bool,
    pub outputs: HashMap<String, String>,
    pub sqs: aws_sdk_sqs::Client,
    pub ddb: aws_sdk_dynamodb::Client,
    /// What the stage's worker pauses a job's schedule with (`pause_after_failures`).
    pub auto_pause: AutoPause,
}

impl Stack {
    /// A lane (see [`Stack::lane`]) named `unique(prefix)` whose queue hides a received
    /// message for one second: a message comes back soon after its worker stops renewing.
    pub async fn with_quick_redelivery(prefix: &str) -> Stack {
        Stack::with_visibility_timeout(prefix, 1).await
    }

    /// A lane (see [`Stack::lane`]) named `unique(prefix)` whose queue hides a received
    /// message for `seconds`.
    pub async fn with_visibility_timeout(prefix: &str, seconds: i32) -> Stack {
        let options = StackOptions {
            visibility_timeout: Some(seconds),
            ..StackOptions::default()
        };
        Stack::lane(prefix, options).await
    }

    /// Deploys (or updates) the template as stage `name` and adapts its queue to `options`.
    pub async fn create(
        sdk: &SdkConfig,
        name: &str,
        options: StackOptions,
    ) -> anyhow::Result<Stack> {
        let source = if options.worker_event_source {
            "enabled"
        } else {
            "disabled"
        };
        let worker = options.worker.clone().unwrap_or_else(WorkerBuild::example);
        let deployment = deploy_worker(name, &worker, &[("WorkerEventSource", source)]).await?;
        let o = &deployment.outputs;
        let get = |key: &str| {
            o.get(key)
                .cloned()
                .with_context(|| format!("the stack has no output {key}"))
        };
        let stack = Stack {
            name: name.into(),
            queue_url: get("JobsQueueUrl")?,
            dlq_url: get("DeadLetterQueueUrl")?,
            table: get("ExecutionsTableName")?,
            effects_table: get("EffectsTableName")?,
            schedule_dlq_url: get("ScheduleDeadLetterQueueUrl")?,
            firings_table: get("FiringsTableName")?,
            schedule_group: get("ScheduleGroupName")?,
            scheduler_role_arn: get("SchedulerRoleArn")?,
            worker_function: get("WorkerFunctionName")?,
            lane: false,
            auto_pause: AutoPause::new(
                sdk,
                &get("ExecutionsTableName")?,
                get("ScheduleGroupName")?,
            ),
            outputs: o.clone(),
            sqs: aws_sdk_sqs::Client::new(sdk),
            ddb: aws_sdk_dynamodb::Client::new(sdk),
        };
        if let Some(v) = options.visibility_timeout {
            stack
                .set_queue_attribute(QueueAttributeName::VisibilityTimeout, v.to_string())
                .await?;
        }
        if let Some(n) = options.max_receive_count {
            let redrive = serde_json::json!({
                "deadLetterTargetArn": stack.arn_of(&stack.dlq_url),
                "maxReceiveCount": n,
            });
            stack
                .set_queue_attribute(QueueAttributeName::RedrivePolicy, redrive.to_string())
                .await?;
        }
        Ok(stack)
    }

    /// A lane of the stage this test binary shares: a jobs queue, DLQs and tables of its
    /// own (made as the stage's are, see [`crate::lane_tables`]), on the schedule group,
    /// roles and functions of one stage deployed once per process. For tests that drive
    /// workers themselves: a deploy costs LocalStack about five seconds of CPU, a lane three
    /// `CreateQueue` and three `CreateTable` calls. `options` may set the queue's
    /// visibility timeout and `maxReceiveCount`; a lane has no worker of its own (the
    /// stage's function does not consume its queue), so `worker` and `worker_event_source`
    /// are refused.
    pub async fn lane(prefix: &str, options: StackOptions) -> Stack {
        assert!(
            options.worker.is_none() && !options.worker_event_source,
            "a lane has no worker function of its own: deploy a stack (Stack::create) for {options:?}"
        );
        static SHAPES: tokio::sync::OnceCell<Vec<(&str, &str, TableShape)>> =
            tokio::sync::OnceCell::const_new();
        static SHARED: tokio::sync::OnceCell<HashMap<String, String>> =
            tokio::sync::OnceCell::const_new();
        let sdk = crate::localstack().await;
        // Only the outputs are shared: SDK clients are bound to the runtime that made
        // their connections, and each test has its own.
        let outputs = SHARED
            .get_or_init(|| async {
                let stage = crate::unique("shared");
                deploy(&stage, &[("WorkerEventSource", "disabled")])
                    .await
                    .expect("the shared stage deploys")
                    .outputs
            })
            .await;
        let get = |key: &str| {
            outputs
                .get(key)
                .cloned()
                .unwrap_or_else(|| panic!("the shared stage has no output {key}"))
        };
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let name = crate::unique(prefix);
        let create = |queue: String, attributes: Vec<(QueueAttributeName, String)>| {
            let sqs = sqs.clone();
            async move {
                sqs.create_queue()
                    .queue_name(queue)
                    .set_attributes(Some(attributes.into_iter().collect()))
                    .send()
                    .await
                    .expect("a lane's queue")
                    .queue_url
                    .expect("a queue URL")
            }
        };
        let dlq_url = create(format!("schedkit-{name}-dlq"), Vec::new()).await;
        let schedule_dlq_url = create(format!("schedkit-{name}-schedule-dlq"), Vec::new()).await;
        let dlq_arn = format!(
            "arn:aws:sqs:us-east-1:000000000000:{}",
            dlq_url.rsplit('/').next().unwrap_or_default()
        );
        // The rest as the shared stage's own jobs queue has it (the template's values).
        let shared = sqs
            .get_queue_attributes()
            .queue_url(get("JobsQueueUrl"))
            .attribute_names(QueueAttributeName::RedrivePolicy)
            .attribute_names(QueueAttributeName::VisibilityTimeout)
            .send()
            .await
            .expect("the shared stage's jobs queue")
            .attributes
            .unwrap_or_default();
        let template_count = shared
            .get(&QueueAttributeName::RedrivePolicy)
            .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
            .and_then(|p| p["maxReceiveCount"].as_u64())
            .expect("the template's maxReceiveCount");
        let redrive = serde_json::json!({
            "deadLetterTargetArn": dlq_arn,
            "maxReceiveCount": options.max_receive_count.map_or(template_count, u64::from),
        });
        let visibility = match options.visibility_timeout {
            Some(v) => v.to_string(),
            None => shared
                .get(&QueueAttributeName::VisibilityTimeout)
                .cloned()
                .expect("the template's visibility timeout"),
        };
        let attributes = vec![
            (QueueAttributeName::RedrivePolicy, redrive.to_string()),
            (QueueAttributeName::VisibilityTimeout, visibility),
        ];
        let queue_url = create(format!("schedkit-{name}-jobs"), attributes.clone()).await;
        // The urgent queue beside it, as the template makes one.
        create(
            urgent_queue_of(&format!("schedkit-{name}-jobs")),
            attributes,
        )
        .await;
        let ddb = aws_sdk_dynamodb::Client::new(&sdk);
        let shapes = SHAPES
            .get_or_init(|| async {
                let mut shapes = Vec::new();
                for (output, suffix) in [
                    ("ExecutionsTableName", "executions"),
                    ("EffectsTableName", "effects"),
                    ("FiringsTableName", "firings"),
                ] {
                    let shape = TableShape::of(&ddb, &get(output))
                        .await
                        .unwrap_or_else(|e| panic!("the shared stage's {output}: {e:#}"));
                    shapes.push((output, suffix, shape));
                }
                shapes
            })
            .await;
        let mut outputs = outputs.clone();
        for (output, suffix, shape) in shapes {
            // Named as the template names a stage's tables: the worker reads its stage from it.
            let table = format!("schedkit-{name}-{suffix}");
            shape
                .create(&ddb, &table)
                .await
                .unwrap_or_else(|e| panic!("a lane's table {table}: {e:#}"));
            outputs.insert(output.to_string(), table);
        }
        outputs.insert("JobsQueueUrl".into(), queue_url.clone());
        outputs.insert("DeadLetterQueueUrl".into(), dlq_url.clone());
        outputs.insert(
            "ScheduleDeadLetterQueueUrl".into(),
            schedule_dlq_url.clone(),
        );
        let own = |key: &str| outputs[key].clone();
        Stack {
            name,
            queue_url,
            dlq_url,
            table: own("ExecutionsTableName"),
            effects_table: own("EffectsTableName"),
            schedule_dlq_url,
            firings_table: own("FiringsTableName"),
            schedule_group: get("ScheduleGroupName"),
            scheduler_role_arn: get("SchedulerRoleArn"),
            worker_function: get("WorkerFunctionName"),
            lane: true,
            auto_pause: AutoPause::new(&sdk, &own("ExecutionsTableName"), get("ScheduleGroupName")),
            outputs,
            sqs,
            ddb,
        }
    }

    /// A processor on this stack that also takes the messages of `catalog`'s chains (their
    /// triggers, ends and steps; no state machine is known, so a trigger is refused).
    pub fn chain_processor(
        &self,
        sdk: &SdkConfig,
        registry: Registry,
        catalog: &str,
        metrics: Metrics,
    ) -> Processor {
        let catalog = schedkit::catalog::Catalog::parse(catalog, "catalog.toml")
            .unwrap_or_else(|e| panic!("{e}"));
        let chains =
            schedkit::batch::Chains::with_state_machines(sdk, &catalog, Default::default());
        Processor::new(
            self.store(),
            self.sqs.clone(),
            registry,
            ProcessorConfig {
                chains: Some(chains),
                ..self.config("w")
            },
            metrics,
        )
    }

    /// Sets `job`'s overlap slot to name `holder` for `hold` more (as a run that entered
    /// it, or a release that failed, would leave it).
    pub async fn hold_slot(&self, job: &str, holder: &str, hold: Duration) -> anyhow::Result<()> {
        let until = chrono::Utc::now().timestamp_millis() + hold.as_millis() as i64;
        self.ddb
            .update_item()
            .table_name(&self.table)
            .key(
                schedkit::store::KEY_ATTRIBUTE,
                AttributeValue::S(schedkit::store::slot_key(job)),
            )
            .update_expression("SET #k = :holder, #u = :until")
            .expression_attribute_names("#k", "slot_key")
            .expression_attribute_names("#u", "slot_until")
            .expression_attribute_values(":holder", AttributeValue::S(holder.to_string()))
            .expression_attribute_values(":until", AttributeValue::N(until.to_string()))
            .send()
            .await?;
        Ok(())
    }

    /// A schedule `name` in the stage's group, hourly, ENABLED, targeting the jobs queue
    /// with `{}` (for tests of pause and resume: it never fires on LocalStack).
    pub async fn create_schedule(&self, sdk: &SdkConfig, name: &str) -> anyhow::Result<()> {
        use aws_sdk_scheduler::types::{FlexibleTimeWindow, FlexibleTimeWindowMode, Target};
        aws_sdk_scheduler::Client::new(sdk)
            .create_schedule()
            .group_name(&self.schedule_group)
            .name(name)
            .schedule_expression("rate(1 hour)")
            .flexible_time_window(
                FlexibleTimeWindow::builder()
                    .mode(FlexibleTimeWindowMode::Off)
                    .build()?,
            )
            .target(
                Target::builder()
                    .arn(self.arn_of(&self.queue_url))
                    .role_arn(&self.scheduler_role_arn)
                    .input("{}")
                    .build()?,
            )
            .send()
            .await?;
        Ok(())
    }

    /// Empties the stage: its queues and tables (the demo starts from a clean slate on
    /// the same stack; deleting and recreating a stack trips LocalStack, which leaves the
    /// old event source mapping behind).
    pub async fn reset(&self) -> anyhow::Result<()> {
        let urgent = self.urgent_queue_url();
        for url in [
            &self.queue_url,
            &urgent,
            &self.dlq_url,
            &self.schedule_dlq_url,
        ] {
            self.sqs.purge_queue().queue_url(url).send().await?;
        }
        for (table, key) in [
            (&self.table, "execution_key"),
            (&self.effects_table, EFFECT_KEY),
            (&self.firings_table, "firing_key"),
        ] {
            let mut start = None;
            loop {
                let page = self
                    .ddb
                    .scan()
                    .table_name(table)
                    .projection_expression("#k")
                    .expression_attribute_names("#k", key)
                    .set_exclusive_start_key(start.take())
                    .send()
                    .await?;
                for item in page.items.unwrap_or_default() {
                    self.ddb
                        .delete_item()
                        .table_name(table)
                        .set_key(Some(item))
                        .send()
                        .await?;
                }
                match page.last_evaluated_key {
                    Some(k) if !k.is_empty() => start = Some(k),
                    _ => break,
                }
            }
        }
        Ok(())
    }

    async fn set_queue_attribute(
        &self,
        name: QueueAttributeName,
        value: String,
    ) -> anyhow::Result<()> {
        self.sqs
            .set_queue_attributes()
            .queue_url(&self.queue_url)
            .attributes(name, value)
            .send()
            .await?;
        Ok(())
    }

    /// The urgent queue beside the jobs queue, where runs of a positive priority go (see
    /// `schedkit::queue::urgent`).
    pub fn urgent_queue_url(&self) -> String {
        urgent_queue_of(&self.queue_url)
    }

    /// The ARN of one of this stack's queues (LocalStack's account and region).
    pub fn arn_of(&self, queue_url: &str) -> String {
        let name = queue_url.rsplit('/').next().unwrap_or_default();
        format!("arn:aws:sqs:us-east-1:000000000000:{name}")
    }

    pub fn store(&self) -> DynamoStore {
        DynamoStore::new(self.ddb.clone(), &self.table)
    }

    /// A store on this stack's table that reaches DynamoDB through `proxy` (which a test
    /// cuts, or has hold or lose an answer), with the SDK's retries short and each call
    /// given up after `operation_timeout` (all attempts included).
    pub fn store_through(
        &self,
        proxy: &crate::proxy::TcpProxy,
        operation_timeout: Duration,
    ) -> DynamoStore {
        let conf = self
            .ddb
            .config()
            .to_builder()
            .endpoint_url(proxy.url())
            .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(2))
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .operation_timeout(operation_timeout)
                    .build(),
            )
            .build();
        DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(conf), &self.table)
    }

    pub fn config(&self, worker_id: &str) -> ProcessorConfig {
        ProcessorConfig {
            queue_url: self.queue_url.clone(),
            dlq_url: self.dlq_url.clone(),
            concurrency: 10,
            worker_id: worker_id.into(),
            // The tests' leases are a second or two: a tighter bound than production's.
            clock_skew: Duration::from_millis(200),
            clock: schedkit::Clock::system(),
            visibility_on_claim: false,
            auto_pause: Some(self.auto_pause.clone()),
            chains: None,
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
        let catalog = schedkit_worker::CATALOG
            .load()
            .expect("the shipped catalog is valid");
        schedkit_worker::jobs::all(self.effects())
            .bind(&catalog)
            .expect("every catalog job is implemented")
    }

    /// The demo's fix for `partner-export`: the partner re-activates the account (the
    /// effects-table item the job reads, `config:partner-account` = `active`).
    pub async fn activate_partner_account(&self) -> anyhow::Result<()> {
        self.ddb
            .put_item()
            .table_name(&self.effects_table)
            .item(
                EFFECT_KEY,
                AttributeValue::S(schedkit_worker::jobs::ACCOUNT_ITEM.into()),
            )
            .item("status", AttributeValue::S("active".into()))
            .send()
            .await?;
        Ok(())
    }

    /// The example jobs' handle on this stack's effects table.
    pub fn effects(&self) -> schedkit_worker::jobs::EffectsTable {
        schedkit_worker::jobs::EffectsTable::new(self.ddb.clone(), Some(self.effects_table.clone()))
    }

    /// The stage's state machines' ARN up to the chain's name (`schedkit-<stage>.`), in the
    /// region and account of its jobs queue, as the template gives the worker.
    pub fn state_machine_prefix(&self) -> String {
        let queue = self.arn_of(&self.queue_url);
        let name = queue.rsplit(':').next().unwrap_or_default();
        let base = queue.strip_suffix(name).unwrap_or(&queue);
        format!(
            "{}stateMachine:{}",
            base.replacen(":sqs:", ":states:", 1),
            schedkit::orchestrator::state_machine_name_prefix(&self.name)
        )
    }

    /// Environment for the worker binary (and LocalStack credentials).
    pub fn worker_env(&self) -> Vec<(String, String)> {
        let prefix = self.state_machine_prefix();
        [
            ("SCHEDKIT_STATE_MACHINE_PREFIX", prefix.as_str()),
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

    /// Sends many bodies, ten per call.
    pub async fn send_all<'a>(
        &self,
        bodies: impl IntoIterator<Item = &'a str>,
    ) -> anyhow::Result<()> {
        let bodies: Vec<&str> = bodies.into_iter().collect();
        for chunk in bodies.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(*b)
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = self
                .sqs
                .send_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await?;
            anyhow::ensure!(out.failed.is_empty(), "some sends failed: {:?}", out.failed);
        }
        Ok(())
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
                .message_attribute_names("All")
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

    /// Writes `record` as it is (a test's seed, bypassing the store's transitions).
    pub async fn put_record(&self, record: &ExecutionRecord) -> anyhow::Result<()> {
        self.ddb
            .put_item()
            .table_name(&self.table)
            .set_item(Some(serde_dynamo::to_item(record)?))
            .send()
            .await?;
        Ok(())
    }

    /// Every execution record (a scan; test-sized tables only).
    pub async fn records(&self) -> anyhow::Result<Vec<ExecutionRecord>> {
        let items = self.scan(&self.table).await?;
        Ok(items
            .into_iter()
            // A job's overlap slot, pause and failure streak live in the table too; none
            // is a record, and none has a status.
            .filter(|i| i.contains_key("status"))
            .map(serde_dynamo::from_item)
            .collect::<Result<_, _>>()?)
    }

    /// Every item of a table of this stack, all pages (a scan; test-sized tables only).
    pub async fn scan(&self, table: &str) -> anyhow::Result<Vec<HashMap<String, AttributeValue>>> {
        let mut out = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            let page = self
                .ddb
                .scan()
                .table_name(table)
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await?;
            out.extend(page.items.unwrap_or_default());
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
impl Stack {
    /// Runs the processors side by side, each long-polling the jobs queue, until the queue
    /// holds no message at all; returns every report, all processors together.
    pub async fn run_until_drained(&self, processors: &[Processor]) -> schedkit::poller::PollStats {
        let options = schedkit::poller::PollOptions {
            wait_seconds: 1,
            max_messages: 10,
            until_drained: true,
            keep_reports: true,
            on_report: None,
        };
        let runs = processors
            .iter()
            .map(|p| schedkit::poller::poll(p, &options, std::future::pending()));
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
