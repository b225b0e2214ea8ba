//! `chaos`: deploys a stage of the example worker on LocalStack and runs the chaos plan at
//! the size given (see `schedkit_testkit::chaos`), then prints the report as a markdown
//! table; exits 1 when anything was lost, doubled or misfiled.
//!
//! `cargo run -p schedkit-testkit --bin chaos -- --deliveries 10000` (LocalStack running,
//! the worker built: `cargo build --bins`).

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use schedkit_testkit::chaos::{self, Plan};
use schedkit_testkit::{Stack, StackOptions, localstack, unique};

#[derive(Parser)]
#[command(
    about = "Chaos run against LocalStack: SIGKILLed pollers, duplicates, failures, an outage"
)]
struct Args {
    /// Messages sent in all.
    #[arg(long, default_value_t = 1000)]
    deliveries: usize,
    /// Worker processes polling at once.
    #[arg(long, default_value_t = 3)]
    pollers: usize,
    /// Seconds of kills (they go on until every message was received once).
    #[arg(long, default_value_t = 60)]
    kill_for: u64,
    /// Seed of the workload and the kills.
    #[arg(long, default_value_t = 11)]
    seed: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let plan = Plan {
        pollers: args.pollers,
        kill_for: Duration::from_secs(args.kill_for),
        seed: args.seed,
        ..Plan::standard(args.deliveries)
    };
    let sdk = localstack().await;
    let stack = match Stack::create(&sdk, &unique("chaos"), StackOptions::default()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("chaos: could not deploy a stage: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    match chaos::run(&stack, &plan).await {
        Ok(report) => {
            print!("{report}");
            let problems = report.problems();
            for p in &problems {
                eprintln!("chaos: {p}");
            }
            if problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("chaos: {e:#}");
            ExitCode::FAILURE
        }
    }
}
