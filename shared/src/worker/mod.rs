//! The worker entry point: one call turns a set of jobs into a running worker.
//!
//! ```no_run
//! use schedkit::worker::{self, EmbeddedCatalog};
//! use schedkit::{JobError, Jobs};
//!
//! const CATALOG: EmbeddedCatalog = EmbeddedCatalog::new("catalog.toml", "[jobs.hello]\nowner = \"me\"\n");
//!
//! async fn hello() -> Result<&'static str, JobError> {
//!     Ok("hello")
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     worker::main(CATALOG, |_setup| Jobs::new().add("hello", hello))
//! }
//! ```
//!
//! [`main`] reads the settings (flags and `SCHEDKIT_*` variables, [`Settings`]), sets up
//! JSON logs and EMF metrics on stdout, binds the jobs to the catalog's policies (refusing
//! to start when the catalog names a queue job that has no implementation), and then
//! serves: inside Lambda (the Runtime API is present) SQS batch events with partial batch
//! responses, anywhere else by long-polling the queue itself with the same semantics. It
//! stops on SIGTERM or Ctrl-C with one line that says what it did and its peak memory.

mod accountant;
mod chains;
mod lambda;
mod process;
mod settings;

use std::process::ExitCode;

pub use crate::job::{BindError, Jobs};
pub use settings::Settings;

use crate::aws::SdkConfig;
use crate::batch::AutoPause;
use crate::batch::{Processor, ProcessorConfig};
use crate::catalog::{Catalog, CatalogErrors};
use crate::clock::Clock;
use crate::poller::{PollOptions, poll};
use crate::store::DynamoStore;
use crate::telemetry::Metrics;

/// A job catalog compiled into the binary (`include_str!`), which `SCHEDKIT_CATALOG` can
/// replace at start-up with a file.
#[derive(Debug, Clone, Copy)]
pub struct EmbeddedCatalog {
    /// The name errors give it (`infra/catalog.toml`).
    pub file: &'static str,
    /// The catalog's TOML.
    pub text: &'static str,
}

impl EmbeddedCatalog {
    /// A `const`, so a binary declares its catalog once at the top of `main.rs`.
    pub const fn new(file: &'static str, text: &'static str) -> Self {
        EmbeddedCatalog { file, text }
    }

    /// The file named by `SCHEDKIT_CATALOG`, else the embedded text; validated.
    pub fn load(&self) -> Result<Catalog, CatalogErrors> {
        match std::env::var_os("SCHEDKIT_CATALOG") {
            Some(path) => Catalog::load(std::path::Path::new(&path)),
            None => Catalog::parse(self.text, self.file),
        }
    }
}

/// What the jobs' constructor may use: the SDK configuration (to build its own clients
/// once, shared by every run) and the worker's settings.
pub struct Setup<'a> {
    /// Region, credentials and endpoint, resolved once.
    pub aws: &'a SdkConfig,
    /// The worker's flags and `SCHEDKIT_*` variables (the effects table among them).
    pub settings: &'a Settings,
    /// The validated catalog the jobs will be bound to.
    pub catalog: &'a Catalog,
}

impl Setup<'_> {
    /// A DynamoDB client on the worker's configuration.
    pub fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(self.aws)
    }
}

/// Runs a worker until it is stopped; the process's exit code: 0 after a clean stop, 1
/// when the Lambda runtime failed, 2 when it could not start (invalid catalog, a job
/// without implementation, bad settings).
pub fn main<S: Clone + Send + Sync + 'static>(
    catalog: EmbeddedCatalog,
    jobs: impl FnOnce(&Setup<'_>) -> Jobs<S>,
) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime starts");
    runtime.block_on(run(catalog, jobs))
}

/// [`main`] on a runtime of the caller's.
pub async fn run<S: Clone + Send + Sync + 'static>(
    catalog: EmbeddedCatalog,
    jobs: impl FnOnce(&Setup<'_>) -> Jobs<S>,
) -> ExitCode {
    crate::telemetry::init_logging();
    let settings = Settings::from_args();
    let catalog = match catalog.load() {
        Ok(c) => c,
        Err(e) => return refuse(&e),
    };
    for w in &catalog.warnings {
        tracing::warn!(warning = %w, "catalog");
    }
    let sdk = crate::aws::load_config().await;
    let metrics = Metrics::stdout().for_stage(settings.stage());
    crate::telemetry::trace_ids::set_stage(settings.stage());
    let accountant = accountant::Accountant {
        store: DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), &settings.table),
        catalog: std::sync::Arc::new(catalog.clone()),
        metrics: metrics.clone(),
    };
    if settings.account {
        let code = account_once(&accountant, settings.account_since, settings.account_commit).await;
        crate::telemetry::traces::shutdown();
        return code;
    }
    let jobs = jobs(&Setup {
        aws: &sdk,
        settings: &settings,
        catalog: &catalog,
    });
    let mut registry = match jobs.bind(&catalog) {
        Ok(r) => r,
        Err(e) => return refuse(&e),
    };
    if registry.reads_secrets() {
        let max_age = u64::from(catalog.settings.secrets_max_age_seconds);
        let store = crate::secrets::SecretStore::new(
            crate::secrets::AwsSource::new(&sdk),
            std::time::Duration::from_secs(max_age),
        );
        registry = registry.with_secrets(std::sync::Arc::new(store));
    }
    let auto_pause = auto_pause(&sdk, &settings, &catalog);
    let processor = Processor::new(
        DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), &settings.table),
        aws_sdk_sqs::Client::new(&sdk),
        registry,
        ProcessorConfig {
            queue_url: settings.queue_url.clone(),
            dlq_url: settings.dlq_url.clone(),
            concurrency: settings.concurrency,
            worker_id: settings
                .worker_id
                .clone()
                .unwrap_or_else(process::default_worker_id),
            clock_skew: crate::clock::DEFAULT_CLOCK_SKEW,
            clock: Clock::system(),
            visibility_on_claim: std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some(),
            auto_pause,
            chains: chains::chains(&sdk, &settings, &catalog),
        },
        metrics,
    );
    let code = if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some() {
        lambda::serve(processor, accountant, process::shutdown_signal()).await
    } else {
        serve_polling(processor, &settings).await
    };
    // What the exporter still holds goes before the process ends.
    tokio::task::spawn_blocking(crate::telemetry::traces::shutdown)
        .await
        .ok();
    code
}

/// The worker's means to pause a job's schedule, when a job of the catalog asks for it
/// (`pause_after_failures`); a warning at start when the schedule group is unknown.
fn auto_pause(sdk: &SdkConfig, settings: &Settings, catalog: &Catalog) -> Option<AutoPause> {
    let jobs: Vec<&str> = catalog
        .jobs
        .values()
        .filter(|j| j.policy.pause_after_failures.is_some())
        .map(|j| j.name.as_str())
        .collect();
    if jobs.is_empty() {
        return None;
    }
    match settings.schedule_group(&catalog.settings.schedule_group) {
        Some(group) => Some(AutoPause::new(sdk, &settings.table, group)),
        None => {
            tracing::warn!(
                jobs = jobs.join(", "),
                "pause_after_failures is not enforced: the stage is unknown, set SCHEDKIT_SCHEDULE_GROUP (or SCHEDKIT_STAGE)"
            );
            None
        }
    }
}

/// Polling mode: long-poll until stopped (or drained), then one closing line.
async fn serve_polling(processor: Processor, settings: &Settings) -> ExitCode {
    let options = PollOptions {
        wait_seconds: settings.wait_seconds,
        until_drained: settings.until_drained,
        ..PollOptions::default()
    };
    let stats = poll(&processor, &options, process::shutdown_signal()).await;
    let outcomes = serde_json::to_string(&stats.outcomes).unwrap_or_default();
    tracing::info!(
        received = stats.received,
        deleted = stats.deleted,
        outcomes = outcomes,
        peak_rss_kb = process::peak_rss_kb(),
        "poller stopped"
    );
    ExitCode::SUCCESS
}

/// `--account`: one check, its JSON on stdout (after its metrics), exit 0; 1 when the
/// stage could not be read.
async fn account_once(
    accountant: &accountant::Accountant,
    since: Option<chrono::DateTime<chrono::Utc>>,
    commit: bool,
) -> ExitCode {
    match accountant.check(since, commit).await {
        Ok((check, _)) => {
            println!(
                "{}",
                serde_json::to_string(&check).expect("a check serialises")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("worker: the accountant's check failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A worker that cannot start says why on stderr, in one line, and exits 2.
fn refuse(e: &dyn std::error::Error) -> ExitCode {
    eprintln!("worker: {e}");
    ExitCode::from(2)
}
