//! A catalog of N jobs (issue 36): what growing the catalog costs. For each size, a grown
//! catalog (`schedkit_testkit::grown`: N scheduled jobs sharing the example worker's
//! implementations, N/10 chains) and, through the counting forwarder:
//! - the stage's template (`schedkit iac init`): its resources and bytes, and the time;
//! - `schedkit schedules sync` into a group of its own: time and Scheduler requests, the
//!   first sync (creates) and a second (unchanged: reads only);
//! - `schedkit status` and the web page's overview: time and requests;
//! - the accountant's check over an hour of the catalog's DONE runs: time and requests;
//! - the release worker started with the catalog (`SCHEDKIT_CATALOG`), draining an empty
//!   queue and stopping: the time to its end and its peak memory, beside the demo's catalog.
//!
//! Powertools for AWS Lambda has no catalog: the peer's cells say so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use chrono::{DurationRound, TimeDelta, Utc};
use schedkit::DynamoStore;
use schedkit::accounting::stage::check;
use schedkit::catalog::Catalog;
use schedkit_testkit::Stack;
use schedkit_testkit::grown::Grown;

use crate::report::{Better, Row, Section};
use crate::seed;
use crate::sides::Programs;
use crate::throughput;
use crate::wire::{Counts, WireCounter};

/// What the peer's cells say.
pub const PEER_HAS_NONE: &str = "none (the peer has no catalog)";

/// One size's figures.
#[derive(Debug, Clone, Default)]
pub struct AtSize {
    pub jobs: usize,
    pub chains: usize,
    pub resources: f64,
    pub template_bytes: f64,
    pub render_ms: f64,
    pub sync_first_ms: f64,
    pub sync_first_requests: f64,
    pub sync_again_ms: f64,
    pub sync_again_requests: f64,
    pub sync_again_writes: f64,
    pub status_ms: f64,
    pub status_requests: f64,
    pub overview_ms: f64,
    pub overview_requests: f64,
    pub account_ms: f64,
    pub account_requests: f64,
    pub account_firings: f64,
    pub worker_ms: f64,
    pub worker_rss_mb: f64,
}

/// Every size (none with `--catalog-sizes 0`).
#[derive(Debug, Clone, Default)]
pub struct CatalogCost {
    pub sizes: Vec<AtSize>,
    /// The worker with the shipped (demo's) catalog: time to its end, peak memory.
    pub demo_worker: (f64, f64),
}

/// Requests of any AWS service.
fn all(counts: &Counts) -> f64 {
    throughput::per(counts, 1, |_, _| true)
}

/// Scheduler calls (REST: neither a JSON target nor a query action).
fn scheduler(counts: &Counts) -> f64 {
    throughput::per(counts, 1, |op, _| op.starts_with("scheduler."))
}

/// Writes the Scheduler calls of `counts` make.
fn scheduler_writes(counts: &Counts) -> f64 {
    throughput::per(counts, 1, |op, _| {
        ["CreateSchedule", "UpdateSchedule", "DeleteSchedule"]
            .iter()
            .any(|w| op == format!("scheduler.{w}"))
    })
}

/// `program args`, with the forwarder as its endpoint; its stdout, and how long it took.
fn timed(
    program: &Path,
    args: &[&str],
    env: &[(String, String)],
    wire: &WireCounter,
) -> anyhow::Result<(String, f64)> {
    let started = Instant::now();
    let out = Command::new(program)
        .current_dir(schedkit_testkit::root())
        .args(args)
        .env("AWS_ENDPOINT_URL", wire.endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env(
            "SCHEDKIT_AUDIT_LOG",
            std::env::temp_dir().join("bench-audit.jsonl"),
        )
        .envs(env.iter().cloned())
        .output()?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    anyhow::ensure!(
        out.status.success(),
        "{} {args:?}: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((String::from_utf8_lossy(&out.stdout).into_owned(), ms))
}

/// Resources of a template's `Resources` section.
fn resources(template: &str) -> usize {
    let Some(start) = template.find("\nResources:\n") else {
        return 0;
    };
    let body = &template[start..];
    let body = &body[..body.find("\nOutputs:\n").unwrap_or(body.len())];
    body.lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.trim_end().ends_with(':'))
        .filter(|l| !l.trim_start().starts_with('#'))
        .count()
}

/// The worker with `catalog` on the stage's (empty) queue until drained: milliseconds to
/// its end, and its peak memory in MB (its closing line's `peak_rss_kb`).
fn worker_start(
    programs: &Programs,
    stack: &Stack,
    catalog: &Path,
    wire: &WireCounter,
) -> anyhow::Result<(f64, f64)> {
    let mut env: Vec<(String, String)> = stack
        .worker_env()
        .into_iter()
        .filter(|(k, _)| k.starts_with("SCHEDKIT_"))
        .collect();
    env.push(("SCHEDKIT_CATALOG".into(), catalog.display().to_string()));
    let (stdout, ms) = timed(
        &programs.worker,
        &["--until-drained", "--wait-seconds", "0"],
        &env,
        wire,
    )?;
    let rss = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|l| l.get("peak_rss_kb").and_then(serde_json::Value::as_f64))
        .ok_or_else(|| anyhow::anyhow!("the worker printed no peak_rss_kb: {stdout}"))?;
    Ok((ms, rss / 1024.0))
}

/// Measures each size.
pub async fn run(
    programs: &Programs,
    stack: &Stack,
    wire: &WireCounter,
    sizes: &[usize],
) -> anyhow::Result<CatalogCost> {
    let mut out = CatalogCost::default();
    let sizes: Vec<usize> = sizes.iter().copied().filter(|n| *n > 0).collect();
    if sizes.is_empty() {
        return Ok(out);
    }
    stack.reset().await?;
    let shipped = schedkit_testkit::root().join("infra/catalog.toml");
    out.demo_worker = worker_start(programs, stack, &shipped, wire)?;
    let dir: PathBuf = schedkit_testkit::target_dir()
        .join("bench-catalogs")
        .join(&stack.name);
    std::fs::create_dir_all(&dir)?;
    // A DONE record as the store writes it, each firing's record a copy (claimed once).
    let done = seed::done_record(&stack.store()).await?;
    for jobs in sizes {
        out.sizes
            .push(one_size(programs, stack, wire, &dir, &done, jobs).await?);
    }
    println!(
        "  the demo's catalog: the worker {:.0} ms to its end, {:.1} MB",
        out.demo_worker.0, out.demo_worker.1
    );
    Ok(out)
}

async fn one_size(
    programs: &Programs,
    stack: &Stack,
    wire: &WireCounter,
    dir: &Path,
    done: &schedkit::ExecutionRecord,
    jobs: usize,
) -> anyhow::Result<AtSize> {
    let grown = Grown {
        jobs,
        chains: jobs / 10,
    };
    let group = format!("{}-n{jobs}", stack.schedule_group);
    let file = dir.join(format!("catalog-{jobs}.toml"));
    std::fs::write(&file, grown.toml(Some(&group)))?;
    let catalog = Catalog::load(&file)?;
    let f = file.display().to_string();
    let mut m = AtSize {
        jobs,
        chains: grown.chains,
        ..AtSize::default()
    };

    // The template.
    let template = dir.join(format!("template-{jobs}/template.yaml"));
    let _ = std::fs::remove_dir_all(template.parent().expect("a folder"));
    let t = template.display().to_string();
    let (_, ms) = timed(
        &programs.console,
        &[
            "--catalog",
            &f,
            "iac",
            "init",
            "--template",
            &t,
            "--binary",
            "worker",
        ],
        &[],
        wire,
    )?;
    let text = std::fs::read_to_string(&template)?;
    m.render_ms = ms;
    m.resources = resources(&text) as f64;
    m.template_bytes = text.len() as f64;

    // Sync, twice, into a group of its own (created by the first).
    let targets = [
        "--group",
        &group,
        "--queue-arn",
        &stack.arn_of(&stack.queue_url),
        "--role-arn",
        &stack.scheduler_role_arn,
        "--dead-letter-arn",
        &stack.arn_of(&stack.schedule_dlq_url),
    ]
    .map(str::to_owned);
    let mut sync = vec![
        "--catalog",
        &f,
        "--table",
        &stack.table,
        "schedules",
        "sync",
        "--yes",
    ];
    sync.extend(targets.iter().map(String::as_str));
    wire.take();
    let (_, ms) = timed(&programs.console, &sync, &[], wire)?;
    let counts = wire.take();
    m.sync_first_ms = ms;
    m.sync_first_requests = scheduler(&counts);
    let (said, ms) = timed(&programs.console, &sync, &[], wire)?;
    let counts = wire.take();
    anyhow::ensure!(
        said.contains("nothing to do"),
        "the second sync of {jobs} jobs planned changes: {said}"
    );
    m.sync_again_ms = ms;
    m.sync_again_requests = scheduler(&counts);
    m.sync_again_writes = scheduler_writes(&counts);

    // status, and the web page's overview.
    let stage = ["--catalog", &f, "--stage", &stack.name];
    let mut status = stage.to_vec();
    status.extend(["--output", "json", "status"]);
    wire.take();
    let (_, ms) = timed(&programs.console, &status, &[], wire)?;
    m.status_ms = ms;
    m.status_requests = all(&wire.take());
    let (ms, requests) =
        crate::web_page::overview_of(&programs.console, stack, wire, &file).await?;
    m.overview_ms = ms;
    m.overview_requests = requests;

    // The accountant over an hour of the catalog's runs, all DONE.
    let now = Utc::now().duration_trunc(TimeDelta::minutes(1))?;
    let firings = schedkit::accounting::expected(
        &catalog,
        now - TimeDelta::hours(1),
        now,
        Duration::ZERO,
        |_, _| false,
    );
    let records = firings.iter().map(|e| {
        let mut r = done.clone();
        r.execution_key = e.key.clone();
        r.job = e.name.clone();
        r.scheduled_for = e
            .scheduled_for
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        r
    });
    seed::put_records(stack, records).await?;
    stack
        .ddb
        .delete_item()
        .table_name(&stack.table)
        .key(
            schedkit::store::KEY_ATTRIBUTE,
            aws_sdk_dynamodb::types::AttributeValue::S(schedkit::store::ledger_key()),
        )
        .send()
        .await?;
    let ddb = stack
        .ddb
        .config()
        .to_builder()
        .endpoint_url(wire.endpoint())
        .build();
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(ddb), &stack.table);
    wire.take();
    let started = Instant::now();
    let found = check(
        &store,
        &catalog,
        now,
        Some(now - TimeDelta::hours(1)),
        false,
    )
    .await?;
    m.account_ms = started.elapsed().as_secs_f64() * 1000.0;
    m.account_requests = throughput::per(&wire.take(), 1, throughput::dynamodb);
    m.account_firings = found.expected as f64;
    anyhow::ensure!(
        found.findings.is_empty(),
        "every firing has its DONE run, yet: {:?}",
        found.findings
    );

    // The worker started with it.
    let (ms, rss) = worker_start(programs, stack, &file, wire)?;
    m.worker_ms = ms;
    m.worker_rss_mb = rss;
    println!(
        "  {jobs:>5} jobs, {:>3} chains: {:>3.0} resources, {:>6.0} bytes; render {:>5.0} ms; sync {:>6.0} ms / {:>5.0} requests, again {:>6.0} ms / {:>5.0} ({:.0} writes); status {:>5.0} ms / {:>3.0}; overview {:>5.0} ms / {:>3.0}; an hour's check {:>5.0} ms / {:>4.0} requests for {:>5.0} firings; worker {:>4.0} ms, {:.1} MB",
        m.chains,
        m.resources,
        m.template_bytes,
        m.render_ms,
        m.sync_first_ms,
        m.sync_first_requests,
        m.sync_again_ms,
        m.sync_again_requests,
        m.sync_again_writes,
        m.status_ms,
        m.status_requests,
        m.overview_ms,
        m.overview_requests,
        m.account_ms,
        m.account_requests,
        m.account_firings,
        m.worker_ms,
        m.worker_rss_mb
    );
    Ok(m)
}

impl CatalogCost {
    /// The report's section; `theirs` is the peer's column title.
    pub fn section(&self, theirs: &str) -> Section {
        let mut rows = Vec::new();
        let row = |name: String, digits, value: f64| {
            Row::new(name, digits, Better::Lower).ours_only(vec![value], PEER_HAS_NONE)
        };
        rows.push(row(
            "the demo's catalog: the worker's start to its end (ms)".into(),
            0,
            self.demo_worker.0,
        ));
        rows.push(row(
            "the demo's catalog: the worker's peak memory (MB)".into(),
            1,
            self.demo_worker.1,
        ));
        for m in &self.sizes {
            let n = format!("{} jobs, {} chains", m.jobs, m.chains);
            for (name, digits, value) in [
                ("the stack's resources", 0, m.resources),
                ("the template's bytes", 0, m.template_bytes),
                ("`iac init` (ms)", 0, m.render_ms),
                ("first sync (ms)", 0, m.sync_first_ms),
                ("first sync: Scheduler requests", 0, m.sync_first_requests),
                ("unchanged sync (ms)", 0, m.sync_again_ms),
                (
                    "unchanged sync: Scheduler requests",
                    0,
                    m.sync_again_requests,
                ),
                ("unchanged sync: writes", 0, m.sync_again_writes),
                ("`status` (ms)", 0, m.status_ms),
                ("`status`: requests", 0, m.status_requests),
                ("the overview (ms)", 0, m.overview_ms),
                ("the overview: requests", 0, m.overview_requests),
                ("an hour's check (ms)", 0, m.account_ms),
                ("an hour's check: DynamoDB requests", 0, m.account_requests),
                ("an hour's check: firings judged", 0, m.account_firings),
                ("the worker's start to its end (ms)", 0, m.worker_ms),
                ("the worker's peak memory (MB)", 1, m.worker_rss_mb),
            ] {
                rows.push(row(format!("{n}: {name}"), digits, value));
            }
        }
        let sizes: Vec<String> = self.sizes.iter().map(|m| m.jobs.to_string()).collect();
        Section {
            title: format!("A catalog of N jobs (N = {})", sizes.join(", ")),
            ours: "schedkit (the console and the worker, release)".into(),
            theirs: theirs.into(),
            rows,
            notes: vec![
                "Each catalog: N scheduled jobs sharing the example worker's implementations (every tenth every 20 minutes, the rest hourly, spread over the hour) and N/10 chains of three stages (`tests/src/grown.rs`).".into(),
                "The template is `schedkit iac init`'s; its resources do not grow with the jobs (a chain is two). Sync runs the console into a schedule group of its own, at its default pace (16 at once, 50 a second): the first creates every schedule, the second only reads (a listing, then one GetSchedule per schedule). `status` and the overview read a page of 50 jobs; the accountant's check judges the hour's firings, all DONE, read by key a hundred to a request. The worker: the release binary started with the catalog on an empty queue until drained, its closing line's peak memory.".into(),
                "Requests counted on the wire (the counting forwarder); milliseconds by the clock around each command (a process each: its start included), against LocalStack on this machine.".into(),
                "Powertools for AWS Lambda has no catalog (no schedules, alarms or console): its cells say none.".into(),
            ],
        }
    }
}
