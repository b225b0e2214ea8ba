//! Test and demo harness: a LocalStack connection that fails loudly when LocalStack is not
//! there, and the queues and tables a worker needs, created per test so tests can run in
//! parallel without seeing each other's messages.

pub mod chains;
pub mod chaos;
pub mod counter;
pub mod graph;
pub mod grown;
pub mod lambda;
pub mod lane_tables;
pub mod metrics_insights;
pub mod otlp;
pub mod private;
pub mod processes;
pub mod proxy;
pub mod roles;
pub mod schedules;
pub mod stack;

use aws_config::{Region, SdkConfig};
use aws_sdk_sqs::config::Credentials;

pub use counter::RequestCounter;
pub use private::PrivateLocalStack;
pub use stack::{Stack, StackOptions, WorkerBuild};

/// The LocalStack endpoint: `AWS_ENDPOINT_URL`, else the launcher's default port.
pub fn endpoint() -> String {
    std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| {
        let port = std::env::var("LOCALSTACK_PORT").unwrap_or_else(|_| "4566".into());
        format!("http://127.0.0.1:{port}")
    })
}

/// SDK configuration for LocalStack. Panics (failing the test, never skipping it) when
/// LocalStack does not answer.
pub async fn localstack() -> SdkConfig {
    let endpoint = endpoint();
    assert_localstack_up(&endpoint).await;
    schedkit::aws::config_loader()
        .endpoint_url(&endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "test",
            "test",
            None,
            None,
            "schedkit-testkit",
        ))
        .load()
        .await
}

async fn assert_localstack_up(endpoint: &str) {
    let addr = endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let reachable = tokio::time::timeout(
        std::time::Duration::from_secs(3),
        tokio::net::TcpStream::connect(addr.clone()),
    )
    .await
    .is_ok_and(|r| r.is_ok());
    assert!(
        reachable,
        "LocalStack is not reachable at {endpoint}: start it with `localstack/launch.sh start` \
         (`make test` does this for you)"
    );
}

/// The checkout whose scripts, template and catalog the kit uses: `SCHEDKIT_ROOT` (another
/// checkout, as a newcomer's), else this workspace.
pub fn root() -> std::path::PathBuf {
    std::env::var_os("SCHEDKIT_ROOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
}

/// The workspace's target directory (`CARGO_TARGET_DIR`, else this workspace's `target/`,
/// whichever checkout [`root`] names: the binaries are built once).
pub fn target_dir() -> std::path::PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// A binary of the workspace as `make build` leaves it (debug profile). Panics, failing the
/// test, when it was not built.
pub fn binary(name: &str) -> std::path::PathBuf {
    let path = target_dir().join("debug").join(name);
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build --workspace --bins --tests` (`make test` does)",
        path.display()
    );
    path
}

/// A name no other test or run uses: `<prefix>-<8 hex digits>`.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// The sum of one metric over EMF lines captured by `schedkit::Metrics::capture`.
pub fn metric_total(lines: &std::sync::Mutex<Vec<String>>, metric: &str) -> f64 {
    lines
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get(metric).and_then(serde_json::Value::as_f64))
        .sum()
}
