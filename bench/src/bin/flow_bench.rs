//! The flow-control section of `make bench` alone (`make bench-flow`): each case's pace
//! against its limit's own and its requests per run, and the waits behind a backlog (a quiet
//! tenant's run, an urgent run), without the rest of the benchmark.
//!
//! `cargo run --release -p schedkit-bench --bin flow-bench -- [--runs 300] [--rounds 3] [--backlog-runs 1000] [--urgent-backlog-runs 10000]` with LocalStack
//! running (`localstack/launch.sh start`; `make bench-flow` does all of it). With
//! `SCHEDKIT_BENCH_LOG=1` the workers' JSON log lines go to stdout: where a case's time
//! goes (`THROTTLED`, `HANDED_ON`, `RUNNING` of each run, timestamped). With
//! `SCHEDKIT_BENCH_COUNTS=1` each case prints its requests by operation and table.

use clap::Parser;
use schedkit_bench::wire::WireCounter;
use schedkit_bench::{behind_backlog, flow_control};
use schedkit_testkit::{Stack, StackOptions, localstack, unique};

#[derive(Parser)]
struct Args {
    /// Runs per case.
    #[arg(long, default_value_t = 300)]
    runs: usize,
    /// Rounds of the three cases (medians reported by `make bench`).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Runs queued before the quiet tenant's; 0 leaves the case out.
    #[arg(long, default_value_t = 1000)]
    backlog_runs: usize,
    /// Runs queued before the urgent one; 0 leaves the case out.
    #[arg(long, default_value_t = 10_000)]
    urgent_backlog_runs: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // The workers' JSON log lines on stdout, to see where a case's time goes.
    if std::env::var_os("SCHEDKIT_BENCH_LOG").is_some() {
        schedkit::telemetry::init_logging();
    }
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("flow-bench"), StackOptions::default()).await?;
    let wire =
        WireCounter::start(schedkit_testkit::endpoint().trim_start_matches("http://")).await?;
    let measured = match flow_control::run(&stack, &wire, args.runs, args.rounds).await {
        Ok(_) => behind_backlog::run(&stack, args.backlog_runs, args.urgent_backlog_runs)
            .await
            .map(|_| ()),
        Err(e) => Err(e),
    };
    schedkit_testkit::stack::undeploy(&stack.name).await?;
    measured?;
    Ok(())
}
