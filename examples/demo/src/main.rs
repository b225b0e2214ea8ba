//! The demo, starting from the job catalog: its schedules are synced into LocalStack's
//! EventBridge Scheduler and a simulated day of them is fired by two local firing engines
//! at once; a burst of one-off envelopes (invoices with duplicate deliveries, a key reused
//! with another payload, poison messages) joins them, and so does the month-end chain (a
//! report, then a CRM sync and a partner export side by side, then a summary), fired with
//! the console; worker processes in polling mode drain the queue; the report reads back
//! the executions table, the DLQ and the workers. The partner account is blocked, so the
//! export fails for good: its job lands in the DLQ and the chain pauses after its stage.
//! The operator's part then fixes the account, reruns the chain from its failed step and
//! redrives the dead letters, until every execution is DONE.
//!
//! `make demo` builds the binaries, starts LocalStack if needed and runs this.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Datelike, TimeZone, Utc, Weekday};
use clap::Parser;
use schedkit::catalog::Catalog;
use schedkit::dead_letter::attr;
use schedkit::trigger::sync;
use schedkit::{Envelope, Status};
use schedkit_firing_engine::{Delivery, Engine, EngineOptions};
use schedkit_testkit::{Stack, StackOptions, localstack};
use serde_json::{Value, json};

#[derive(Parser)]
#[command(about = "Runs schedkit's demo against LocalStack")]
struct Args {
    /// Worker processes polling side by side.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// The worker binary (default: `worker` next to this binary).
    #[arg(long)]
    worker_bin: Option<PathBuf>,
    /// The stage deployed from infra/template.yaml (redeployed empty on every run).
    #[arg(long, default_value = "demo")]
    name: String,
    /// Where the workers' stdout (JSON logs and EMF lines) is written.
    #[arg(long, default_value = "target/demo")]
    log_dir: PathBuf,
    /// The job catalog whose schedules fire (default: the checkout's `infra/catalog.toml`;
    /// the checkout is `SCHEDKIT_ROOT`, else this workspace).
    #[arg(long)]
    catalog: Option<PathBuf>,
}

impl Args {
    fn catalog(&self) -> &std::path::Path {
        self.catalog.as_deref().expect("set in main")
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = Args::parse();
    args.catalog
        .get_or_insert_with(|| schedkit_testkit::root().join("infra/catalog.toml"));
    let worker_bin = match &args.worker_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("worker"),
    };
    anyhow::ensure!(
        worker_bin.exists(),
        "worker binary not found at {} (build it with `cargo build --bins`)",
        worker_bin.display()
    );
    let sdk = localstack().await;

    println!(
        "== schedkit demo on LocalStack ({})",
        schedkit_testkit::endpoint()
    );
    println!(
        "deploying infra/template.yaml as stage `{}` (infra/deploy-localstack.sh)...",
        args.name
    );
    let stack = Stack::create(&sdk, &args.name, StackOptions::default()).await?;
    stack.reset().await?;
    println!(
        "stack {}: queue {}, DLQ {}, table {}, schedule group {}\n",
        schedkit_testkit::stack::stack_name(&args.name),
        stack.queue_url.rsplit('/').next().unwrap_or_default(),
        stack.dlq_url.rsplit('/').next().unwrap_or_default(),
        stack.table,
        stack.schedule_group
    );

    let day = next_weekday(Utc::now());
    let firings = fire_catalog_day(&sdk, &stack, args.catalog(), day).await?;

    let burst = burst();
    println!("\nsending a burst of {} one-off messages:", burst.len());
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for (kind, _) in &burst {
        *kinds.entry(kind).or_default() += 1;
    }
    for (kind, n) in &kinds {
        println!("  {n:>3}  {kind}");
    }
    stack
        .send_all(burst.iter().map(|(_, body)| body.as_str()))
        .await?;
    println!("\nfiring the month-end chain by hand:");
    console(
        &args,
        &stack,
        &worker_bin,
        &["fire", "month-end", "--key", CHAIN_RUN],
    )
    .await?;

    println!(
        "\nrunning {} worker processes in polling mode until the queue drains...",
        args.workers
    );
    std::fs::create_dir_all(&args.log_dir)?;
    let started = Instant::now();
    let workers = drain_until_chain_ends(&args, &stack, &worker_bin, "run").await?;
    let elapsed = started.elapsed();

    report(&stack, &workers, elapsed, burst.len() + firings + 1).await?;
    operate(&args, &stack, &worker_bin).await?;
    account_day(&stack, args.catalog(), day).await
}

/// The accountant's view of the fast-forwarded day, as its check would see it once every
/// firing's deadline has passed: each firing the catalog expected, and its run.
async fn account_day(
    stack: &Stack,
    catalog: &std::path::Path,
    day: DateTime<Utc>,
) -> anyhow::Result<()> {
    use schedkit::accounting::{expected, ledger, stage};
    let catalog = Catalog::load(catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
    let end = day + chrono::Duration::days(1);
    let judged_at = end + chrono::Duration::from_std(ledger::longest_wait(&catalog, stage::GRACE))?;
    println!(
        "\n== the accountant: every firing the catalog expected on {}, checked as at {}",
        day.format("%a %Y-%m-%d"),
        judged_at.format("%Y-%m-%d %H:%M UTC")
    );
    // The day's firings read against their records as the check does (by job, through
    // the `by-job` index), judged once every deadline of the day has passed: a look,
    // nothing written (the day is ahead of the stage's own checks).
    let found = stage::account(&stack.store(), &catalog, day, end, judged_at, &[]).await?;
    let mut per_name: BTreeMap<String, usize> = BTreeMap::new();
    for e in expected(&catalog, day, end, stage::GRACE, |_, _| false) {
        *per_name.entry(e.name).or_default() += 1;
    }
    let unaccounted: Vec<_> = found.missed.iter().chain(&found.late).collect();
    for (name, n) in &per_name {
        let open = unaccounted.iter().filter(|u| &u.name == name).count();
        println!(
            "  {name:<14} {n:>2} expected, {:>2} accounted for, {open} missed or late",
            n - open
        );
    }
    anyhow::ensure!(
        unaccounted.is_empty(),
        "firings unaccounted for: {unaccounted:#?}"
    );
    println!(
        "every expected firing accounted for: {} expected, 0 missed, 0 late (their runs read in {} request(s), by key)",
        found.expected, found.queries
    );
    Ok(())
}

/// The month-end chain run the demo fires (`fire month-end --key ...`).
const CHAIN_RUN: &str = "month-end#2026-11";

/// Runs `schedkit --stage <stage> command`, printing the command and its output.
async fn console(
    args: &Args,
    stack: &Stack,
    worker_bin: &std::path::Path,
    command: &[&str],
) -> anyhow::Result<()> {
    let console_bin = worker_bin.with_file_name("schedkit");
    println!("\n$ schedkit --stage {} {}", args.name, command.join(" "));
    let out = tokio::process::Command::new(&console_bin)
        .arg("--stage")
        .arg(&args.name)
        .args(command)
        .envs(stack.worker_env())
        .env("SCHEDKIT_CATALOG", args.catalog())
        .env("SCHEDKIT_AUDIT_LOG", args.log_dir.join("audit.jsonl"))
        .env("NO_COLOR", "1")
        .output()
        .await
        .with_context(|| format!("starting {}", console_bin.display()))?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    anyhow::ensure!(
        out.status.success(),
        "schedkit {} failed: {}",
        command.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Worker rounds until the queue is drained and the chain run has ended: between two of
/// its stages the queue can be empty for a moment while Step Functions sends the next
/// step, so a drained queue alone does not mean the chain is done.
async fn drain_until_chain_ends(
    args: &Args,
    stack: &Stack,
    worker_bin: &std::path::Path,
    label: &str,
) -> anyhow::Result<Vec<WorkerSummary>> {
    let mut workers = Vec::new();
    for round in 1..=30 {
        workers.extend(run_workers(args, stack, worker_bin, &format!("{label}-{round}")).await?);
        let ended = stack
            .record(CHAIN_RUN)
            .await?
            .is_some_and(|r| r.status != Status::Running);
        if ended {
            return Ok(workers);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    anyhow::bail!("the chain run {CHAIN_RUN} did not end")
}

/// Worker processes in polling mode until the queue is drained; their closing summaries.
async fn run_workers(
    args: &Args,
    stack: &Stack,
    worker_bin: &std::path::Path,
    label: &str,
) -> anyhow::Result<Vec<WorkerSummary>> {
    let mut children = Vec::new();
    for i in 0..args.workers {
        let log = args.log_dir.join(format!("worker-{i}-{label}.log"));
        let child = tokio::process::Command::new(worker_bin)
            .args(["--until-drained", "--wait-seconds", "1"])
            .envs(stack.worker_env())
            .env("SCHEDKIT_WORKER_ID", format!("demo-worker-{i}"))
            .stdout(std::fs::File::create(&log)?)
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", worker_bin.display()))?;
        children.push((log, child));
    }
    let mut workers = Vec::new();
    for (log, mut child) in children {
        let status = child.wait().await?;
        anyhow::ensure!(
            status.success(),
            "worker exited with {status}; see {}",
            log.display()
        );
        workers.push(summary(&log)?);
    }
    Ok(workers)
}

/// The operator's part, with the `schedkit` console: what is wrong (a failed job, a
/// paused chain), a fix, the chain's rerun from its failed step, a redrive, and every
/// execution DONE.
async fn operate(args: &Args, stack: &Stack, worker_bin: &std::path::Path) -> anyhow::Result<()> {
    let console = |command: &'static [&'static str]| console(args, stack, worker_bin, command);
    println!("\n== operating: the alarms said a job failed and a chain paused");
    console(&["status"]).await?;
    console(&["dlq", "list"]).await?;
    console(&["chains", "show", CHAIN_RUN]).await?;
    let before = step_attempts(stack).await?;

    println!(
        "\n== the fix: the partner re-activates the account (config:partner-account = active)"
    );
    stack.activate_partner_account().await?;
    console(&["chains", "rerun", CHAIN_RUN, "--yes"]).await?;
    console(&["dlq", "redrive", "--job", "partner-export", "--yes"]).await?;
    println!("(workers drain the queue again)");
    drain_until_chain_ends(args, stack, worker_bin, "redrive").await?;
    console(&["chains", "show", CHAIN_RUN]).await?;
    // Only the failed step and the stage after it ran again.
    let after = step_attempts(stack).await?;
    for step in ["usage-report", "crm-sync"] {
        anyhow::ensure!(
            after[step] == before[step],
            "the rerun ran the DONE step {step} again ({} attempts, then {})",
            before[step],
            after[step]
        );
    }
    println!(
        "the rerun ran orders-export and summary; usage-report and crm-sync answered from their records"
    );
    // Rejected messages can never succeed as they are: read, then dropped.
    console(&[
        "dlq",
        "purge",
        "--reason",
        "poison",
        "--reason",
        "unknown-job",
        "--reason",
        "key-conflict",
        "--yes",
    ])
    .await?;
    console(&["status"]).await?;

    let records = stack.records().await?;
    let open: Vec<_> = records
        .iter()
        .filter(|r| r.status != Status::Done)
        .collect();
    anyhow::ensure!(open.is_empty(), "not every execution is DONE: {open:?}");
    println!(
        "\nevery execution is DONE ({} records, the chain run and its steps among them); audit trail in {}",
        records.len(),
        args.log_dir.join("audit.jsonl").display()
    );
    Ok(())
}

/// Attempts of each step of the chain run, from their records.
async fn step_attempts(stack: &Stack) -> anyhow::Result<BTreeMap<&'static str, u32>> {
    let mut out = BTreeMap::new();
    for step in ["usage-report", "crm-sync", "orders-export", "summary"] {
        let record = stack.record(&format!("{CHAIN_RUN}#{step}")).await?;
        out.insert(step, record.map_or(0, |r| r.attempt));
    }
    Ok(out)
}

/// The first weekday (UTC) after `now`, at midnight: a day on which every catalog schedule
/// fires, whatever day the demo runs.
fn next_weekday(now: DateTime<Utc>) -> DateTime<Utc> {
    let mut day = now.date_naive().succ_opt().expect("a next day");
    while matches!(day.weekday(), Weekday::Sat | Weekday::Sun) {
        day = day.succ_opt().expect("a next day");
    }
    Utc.from_utc_datetime(&day.and_hms_opt(0, 0, 0).expect("midnight"))
}

/// Syncs the catalog's schedules (in a group of the demo's own) and fast-forwards one day
/// of them with two engines side by side; returns how many envelopes were delivered.
async fn fire_catalog_day(
    sdk: &aws_config::SdkConfig,
    stack: &Stack,
    catalog: &std::path::Path,
    day: DateTime<Utc>,
) -> anyhow::Result<usize> {
    let mut catalog = Catalog::load(catalog).map_err(|e| anyhow::anyhow!("{e}"))?;
    // The stack made the stage's schedule group and tagged it with where its schedules
    // send; the schedules themselves are sync's (as `make deploy-localstack` does it).
    catalog.settings.schedule_group = stack.schedule_group.clone();
    let scheduler = sync::client(sdk);
    let targets = sync::stage_targets(&scheduler, &stack.schedule_group)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the stack did not tag its schedule group"))?;
    println!("syncing {} into EventBridge Scheduler:", catalog.file);
    let plan = sync::plan(&scheduler, &catalog, &targets).await?;
    println!("{plan}");
    sync::apply(&scheduler, &plan).await?;

    let engine = |owner: &str| {
        Engine::new(
            sdk,
            EngineOptions {
                groups: vec![stack.schedule_group.clone()],
                claims_table: Some(stack.firings_table.clone()),
                owner: owner.into(),
                ..EngineOptions::default()
            },
        )
    };
    let (a, b) = (engine("engine-a"), engine("engine-b"));
    let end = day + chrono::Duration::days(1);
    let (fa, fb) = tokio::join!(a.fast_forward(day, end), b.fast_forward(day, end));
    let all: Vec<_> = fa?.into_iter().chain(fb?).collect();
    let mut per_schedule: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in all
        .iter()
        .filter(|f| matches!(f.delivery, Delivery::Delivered { .. }))
    {
        per_schedule
            .entry(f.schedule.clone())
            .or_default()
            .push(f.scheduled_time.format("%H:%M").to_string());
    }
    let delivered: usize = per_schedule.values().map(Vec::len).sum();
    let elsewhere = all
        .iter()
        .filter(|f| f.delivery == Delivery::FiredElsewhere)
        .count();
    println!(
        "\nfast-forwarded {} 00:00-24:00 UTC with two engines at once: {delivered} firings delivered once each ({elsewhere} seen as already fired by the other engine)",
        day.format("%a %Y-%m-%d")
    );
    for (schedule, times) in per_schedule.iter_mut() {
        times.sort();
        println!(
            "  {schedule:<14} {} at {} UTC",
            times.len(),
            times.join(", ")
        );
    }
    Ok(delivered)
}

/// The burst: (what it is, body).
fn burst() -> Vec<(&'static str, String)> {
    let at = |h: u32| Utc.with_ymd_and_hms(2026, 11, 1, h, 0, 0).unwrap();
    let envelope = |job: &str, h: u32, payload: Value| {
        let mut e = Envelope::new(job, at(h));
        e.payload = payload.as_object().cloned();
        e.to_json()
    };
    let mut out = Vec::new();
    for t in 1..=12 {
        let invoice = envelope(
            "record-invoice",
            2,
            json!({"tenant": format!("t{t:02}"), "billing_month": "2026-10", "amount_cents": 1000 + t}),
        );
        out.push(("record-invoice", invoice.clone()));
        out.push(("record-invoice duplicate delivery", invoice.clone()));
        if t <= 3 {
            out.push(("record-invoice duplicate delivery", invoice));
        }
    }
    out.push((
        "record-invoice key conflict (same key, other amount)",
        envelope(
            "record-invoice",
            2,
            json!({"tenant": "t02", "billing_month": "2026-10", "amount_cents": 999_999}),
        ),
    ));
    out.push(("poison: not JSON", "nightly-export please".to_string()));
    out.push((
        "poison: unknown job",
        envelope("send-newsletter", 10, json!({})),
    ));
    out.push((
        "poison: missing field",
        json!({"job": "flaky-sync"}).to_string(),
    ));
    out.push((
        "poison: wrong type",
        json!({"job": 42, "scheduled_for": "2026-11-01T10:00:00Z"}).to_string(),
    ));
    out
}

/// A worker's closing "poller stopped" line.
struct WorkerSummary {
    outcomes: BTreeMap<String, u64>,
    peak_rss_kb: u64,
    lines: usize,
}

fn summary(log: &PathBuf) -> anyhow::Result<WorkerSummary> {
    let text = std::fs::read_to_string(log)?;
    let last = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["message"] == "poller stopped")
        .with_context(|| format!("no closing summary in {}", log.display()))?;
    let outcomes = serde_json::from_str(last["outcomes"].as_str().unwrap_or("{}"))?;
    Ok(WorkerSummary {
        outcomes,
        peak_rss_kb: last["peak_rss_kb"].as_u64().unwrap_or(0),
        lines: text.lines().count(),
    })
}

async fn report(
    stack: &Stack,
    workers: &[WorkerSummary],
    elapsed: Duration,
    sent: usize,
) -> anyhow::Result<()> {
    let records = stack.records().await?;
    println!(
        "\n== executions by job and status ({} records)",
        records.len()
    );
    let mut table: BTreeMap<(String, String), (usize, u32)> = BTreeMap::new();
    for r in &records {
        let e = table
            .entry((r.job.clone(), r.status.to_string()))
            .or_default();
        e.0 += 1;
        e.1 += r.attempt;
    }
    println!(
        "  {:<16} {:<8} {:>5} {:>9}",
        "job", "status", "runs", "attempts"
    );
    for ((job, status), (n, attempts)) in &table {
        println!("  {job:<16} {status:<8} {n:>5} {attempts:>9}");
    }

    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    for w in workers {
        for (k, v) in &w.outcomes {
            *outcomes.entry(k.clone()).or_default() += v;
        }
    }
    println!("\n== deliveries by outcome (all workers)");
    for (k, v) in &outcomes {
        println!("  {k:<14} {v:>4}");
    }
    println!(
        "  duplicates skipped: {}",
        outcomes.get("duplicate").copied().unwrap_or(0)
    );

    let mut applied_more_than_once = 0;
    let invoices: Vec<_> = records
        .iter()
        .filter(|r| r.job == "record-invoice")
        .collect();
    for r in &invoices {
        if stack.effect_applied(&r.execution_key).await? != 1 {
            applied_more_than_once += 1;
        }
    }
    println!(
        "  invoice side effects: {} keys, {} applied other than exactly once",
        invoices.len(),
        applied_more_than_once
    );

    let letters = stack.peek_dlq().await?;
    println!("\n== dead letters ({})", letters.len());
    let attribute = |m: &aws_sdk_sqs::types::Message, name: &str| {
        m.message_attributes
            .as_ref()
            .and_then(|a| a.get(name))
            .and_then(|v| v.string_value.clone())
            .unwrap_or_else(|| "-".into())
    };
    let mut rows: Vec<_> = letters
        .iter()
        .map(|m| {
            (
                attribute(m, attr::REASON),
                attribute(m, attr::JOB),
                attribute(m, attr::ATTEMPTS),
                attribute(m, attr::ERROR),
            )
        })
        .collect();
    rows.sort();
    println!("  {:<19} {:<15} {:>8}  error", "reason", "job", "attempts");
    for (reason, job, attempts, error) in rows {
        let error: String = error.chars().take(90).collect();
        println!("  {reason:<19} {job:<15} {attempts:>8}  {error}");
    }
    let received: u64 = outcomes.values().sum();
    println!("\n== run");
    println!(
        "  envelopes sent {sent} (burst, firings, the chain's trigger), deliveries processed {received}, in {:.1} s",
        elapsed.as_secs_f64()
    );
    println!(
        "  throughput {:.1} deliveries/s (the run mostly waits on retry backoff and the long jobs)",
        received as f64 / elapsed.as_secs_f64()
    );
    for (i, w) in workers.iter().enumerate() {
        println!(
            "  worker {i}: peak RSS {} KiB, {} log/metric lines",
            w.peak_rss_kb, w.lines
        );
    }
    let (visible, in_flight, delayed) = stack.counts(&stack.queue_url).await?;
    println!("  jobs queue now: {visible} visible, {in_flight} in flight, {delayed} delayed");
    anyhow::ensure!(
        applied_more_than_once == 0,
        "a side effect was not applied exactly once"
    );
    Ok(())
}
