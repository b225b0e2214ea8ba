//! schedkit's worker side by side with Powertools for AWS Lambda (Python), its
//! idempotency and batch utilities used as their docs show (`bench/peer/`), on the same
//! LocalStack in the same run: the same envelopes (`record-invoice`, a share of them
//! delivered twice), the same effect write, batches of 10, each side a process polling the
//! jobs queue until it is drained, the two sides taking turns so that LocalStack's drift
//! cancels. For each run: wall time, CPU time of the worker process per delivery, its peak
//! RSS (both from `wait4`), and the DynamoDB and SQS requests it made per delivery, counted
//! on the wire the same way for both (`schedkit_bench::wire`); then a check that every
//! invoice's effect was applied exactly once.
//!
//! ```text
//! cargo build --release --bin worker && cargo run -p schedkit-bench --bin peer-bench -- \
//!     [--deliveries 2000] [--duplicate-share 0.2] [--rounds 2]
//! ```
//! with LocalStack running (`localstack/launch.sh start`).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};
use clap::Parser;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use schedkit::Envelope;
use schedkit_bench::wire::{Counts, WireCounter};
use schedkit_testkit::{Stack, StackOptions, localstack, unique};
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// Messages sent per run, duplicates included.
    #[arg(long, default_value_t = 2000)]
    deliveries: usize,
    /// Share of the deliveries that repeat an earlier invoice (same key, same payload).
    #[arg(long, default_value_t = 0.2)]
    duplicate_share: f64,
    /// Runs of each side, alternating.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Side {
    Schedkit,
    Powertools,
}

impl Side {
    fn label(self) -> &'static str {
        match self {
            Side::Schedkit => "schedkit (Rust, release)",
            Side::Powertools => "Powertools for AWS Lambda (Python 3.13)",
        }
    }
}

/// One run of one side.
#[derive(Debug, Clone)]
struct Run {
    wall: Duration,
    cpu: Duration,
    peak_rss_kb: i64,
    counts: Counts,
}

/// The workload: `n` envelopes, `share` of them repeating an earlier invoice, shuffled.
fn workload(n: usize, share: f64, seed: u64) -> (Vec<String>, usize) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let unique = n - (n as f64 * share).round() as usize;
    let at = "2026-11-01T02:00:00Z".parse().expect("an instant");
    let invoices: Vec<String> = (0..unique)
        .map(|t| {
            let mut e = Envelope::new("record-invoice", at);
            e.payload = json!({"tenant": format!("t{t:05}"), "billing_month": "2026-10", "amount_cents": 1000 + t})
                .as_object()
                .cloned();
            e.to_json()
        })
        .collect();
    let mut bodies = invoices.clone();
    while bodies.len() < n {
        bodies.push(invoices[rng.random_range(0..unique)].clone());
    }
    bodies.shuffle(&mut rng);
    (bodies, unique)
}

/// Runs `command` to its end; wall time, and the process's CPU time and peak RSS.
fn measure(mut command: Command) -> anyhow::Result<(Duration, Duration, i64)> {
    let started = Instant::now();
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting a side")?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for; `status` and `usage` outlive the call.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    anyhow::ensure!(
        waited == pid,
        "wait4 failed: {}",
        std::io::Error::last_os_error()
    );
    anyhow::ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the side exited with status {status}"
    );
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Ok((
        started.elapsed(),
        time(usage.ru_utime) + time(usage.ru_stime),
        usage.ru_maxrss,
    ))
}

async fn recreate_table(ddb: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<()> {
    let _ = ddb.delete_table().table_name(table).send().await;
    ddb.create_table()
        .table_name(table)
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("id")
                .key_type(KeyType::Hash)
                .build()?,
        )
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("id")
                .attribute_type(ScalarAttributeType::S)
                .build()?,
        )
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await?;
    Ok(())
}

/// Invoices whose effect was applied exactly once, of `unique`.
async fn applied_once(stack: &Stack) -> anyhow::Result<usize> {
    let items = stack.scan(&stack.effects_table).await?;
    Ok(items
        .iter()
        .filter(|i| {
            i.get("applied")
                .and_then(|v| v.as_n().ok())
                .map(String::as_str)
                == Some("1")
        })
        .count())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `median (min–max)`.
fn cell(v: &[f64], digits: usize) -> String {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let m = median(v.to_vec());
    if v.len() > 1 {
        format!("{m:.digits$} ({min:.digits$}–{max:.digits$})")
    } else {
        format!("{m:.digits$}")
    }
}

/// Requests per delivery of a run, by kind.
fn per_delivery(run: &Run, deliveries: usize, kind: impl Fn(&str, &str) -> bool) -> f64 {
    let n: u64 = run
        .counts
        .iter()
        .filter(|((op, table), _)| kind(op, table))
        .map(|(_, n)| n)
        .sum();
    n as f64 / deliveries as f64
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let root = schedkit_testkit::root();
    let worker = root.join("target/release/worker");
    anyhow::ensure!(
        worker.exists(),
        "{} is missing: cargo build --release --bin worker",
        worker.display()
    );
    let python = String::from_utf8(
        Command::new(root.join("bench/peer/install.sh"))
            .output()
            .context("installing the peer (bench/peer/install.sh)")?
            .stdout,
    )?
    .trim()
    .to_string();
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("peer-bench"), StackOptions::default()).await?;
    let idempotency = format!("{}-powertools-idempotency", stack.name);
    let wire =
        WireCounter::start(schedkit_testkit::endpoint().trim_start_matches("http://")).await?;
    let (bodies, unique_invoices) = workload(args.deliveries, args.duplicate_share, 7);
    println!(
        "{} deliveries ({} invoices, {} delivered twice or more), batches of 10, {} rounds, on {}",
        args.deliveries,
        unique_invoices,
        args.deliveries - unique_invoices,
        args.rounds,
        schedkit_testkit::endpoint()
    );
    let mut runs: BTreeMap<Side, Vec<Run>> = BTreeMap::new();
    for round in 0..args.rounds {
        let order = if round % 2 == 0 {
            [Side::Schedkit, Side::Powertools]
        } else {
            [Side::Powertools, Side::Schedkit]
        };
        for side in order {
            stack.reset().await?;
            recreate_table(&stack.ddb, &idempotency).await?;
            stack.send_all(bodies.iter().map(String::as_str)).await?;
            wire.take();
            let mut command = match side {
                Side::Schedkit => {
                    let mut c = Command::new(&worker);
                    c.args(["--until-drained", "--wait-seconds", "1"])
                        .envs(stack.worker_env())
                        .env("SCHEDKIT_WORKER_ID", "bench");
                    c
                }
                Side::Powertools => {
                    let mut c = Command::new(&python);
                    c.arg(root.join("bench/peer/powertools_worker.py"))
                        .envs(stack.worker_env())
                        .env("AWS_DEFAULT_REGION", "us-east-1")
                        .env("PEER_QUEUE_URL", &stack.queue_url)
                        .env("PEER_IDEMPOTENCY_TABLE", &idempotency)
                        .env("PEER_EFFECTS_TABLE", &stack.effects_table);
                    c
                }
            };
            command.env("AWS_ENDPOINT_URL", wire.endpoint());
            let (wall, cpu, peak_rss_kb) =
                tokio::task::spawn_blocking(move || measure(command)).await??;
            let counts = wire.take();
            let once = applied_once(&stack).await?;
            anyhow::ensure!(
                once == unique_invoices,
                "{}: {once} of {unique_invoices} invoices applied exactly once",
                side.label()
            );
            println!(
                "  round {}: {:<42} {:>6.2} s wall, {:>6.3} ms CPU per delivery, peak RSS {} MB",
                round + 1,
                side.label(),
                wall.as_secs_f64(),
                cpu.as_secs_f64() * 1000.0 / args.deliveries as f64,
                peak_rss_kb / 1024
            );
            runs.entry(side).or_default().push(Run {
                wall,
                cpu,
                peak_rss_kb,
                counts,
            });
        }
    }
    let n = args.deliveries;
    let effects = stack.effects_table.clone();
    let effects_table = effects.clone();
    type Metric<'a> = (&'a str, usize, Box<dyn Fn(&Run) -> f64 + 'a>);
    let metrics: Vec<Metric> = vec![
        ("wall time (s)", 2, Box::new(|r: &Run| r.wall.as_secs_f64())),
        (
            "CPU per delivery (ms)",
            3,
            Box::new(move |r: &Run| r.cpu.as_secs_f64() * 1000.0 / n as f64),
        ),
        (
            "peak RSS (MB)",
            1,
            Box::new(|r: &Run| r.peak_rss_kb as f64 / 1024.0),
        ),
        (
            "DynamoDB requests per delivery, all",
            2,
            Box::new(move |r: &Run| per_delivery(r, n, |op, _| op.starts_with("DynamoDB"))),
        ),
        (
            "  of which idempotency records (schedkit: claim, and the transaction with the effect)",
            2,
            Box::new(move |r: &Run| {
                per_delivery(r, n, |op, table| {
                    op.starts_with("DynamoDB") && table != effects
                })
            }),
        ),
        (
            "  of which effect writes alone (schedkit's ride in its transaction)",
            2,
            Box::new(move |r: &Run| {
                per_delivery(r, n, |op, table| {
                    op.starts_with("DynamoDB") && table == effects_table
                })
            }),
        ),
        (
            "SQS requests per delivery",
            2,
            Box::new(move |r: &Run| per_delivery(r, n, |op, _| op.starts_with("AmazonSQS"))),
        ),
    ];
    println!(
        "\n| {n} deliveries, {:.0} % duplicates | {} | {} | peer ÷ schedkit |",
        args.duplicate_share * 100.0,
        Side::Schedkit.label(),
        Side::Powertools.label()
    );
    println!("| --- | ---: | ---: | ---: |");
    for (name, digits, f) in &metrics {
        let of = |s: Side| runs[&s].iter().map(f).collect::<Vec<_>>();
        let (ours, theirs) = (of(Side::Schedkit), of(Side::Powertools));
        let ratio = median(theirs.clone()) / median(ours.clone());
        println!(
            "| {name} | {} | {} | {ratio:.1}× |",
            cell(&ours, *digits),
            cell(&theirs, *digits)
        );
    }
    println!("\nrequests by operation and table, last run of each side:");
    for (side, list) in &runs {
        println!("  {}:", side.label());
        for ((op, table), count) in &list.last().expect("a run").counts {
            println!("    {op:<40} {table:<50} {count}");
        }
    }
    Ok(())
}
