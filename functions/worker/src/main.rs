//! The worker binary: Lambda mode when the Runtime API is present, polling mode otherwise.

use std::process::ExitCode;

use clap::Parser;
use schedkit::poller::{PollOptions, poll};
use schedkit_worker::{Settings, lambda};

#[tokio::main]
async fn main() -> ExitCode {
    schedkit::telemetry::init_logging();
    let settings = Settings::parse();
    let sdk = schedkit::aws::load_config().await;
    let processor = match settings.processor(&sdk, schedkit::Metrics::stdout()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("worker: {e}");
            return ExitCode::from(2);
        }
    };

    if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some() {
        return match lambda::run(processor).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %e, "lambda runtime stopped");
                ExitCode::FAILURE
            }
        };
    }

    let options = PollOptions {
        wait_seconds: settings.wait_seconds,
        until_drained: settings.until_drained,
        ..PollOptions::default()
    };
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let stats = poll(&processor, &sqs, &options, shutdown_signal()).await;
    let outcomes = serde_json::to_string(&stats.outcomes).unwrap_or_default();
    tracing::info!(
        received = stats.received,
        deleted = stats.deleted,
        outcomes = outcomes,
        peak_rss_kb = peak_rss_kb(),
        "poller stopped"
    );
    ExitCode::SUCCESS
}

/// Ctrl-C or SIGTERM (what container platforms send before stopping a task).
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler installs");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// The process's peak resident set size (Linux), for the demo's report.
fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
