//! Flow control (issue 24): what a limit costs. A run its limit holds back is not an
//! attempt: its claim is given back and its message sent again with a delay (outcome
//! `throttled`), and each such look costs a claim, a permit's take and give-back, a send
//! and a delete. Teams that turn limits on report the price in throughput (River's global
//! limits halved its), so this measures both, with a limit against without one: runs per
//! second, and DynamoDB and SQS requests per run.
//!
//! `runs` runs of one job that awaits 50 ms, sent at once, through three processors in
//! this process polling the jobs queue with schedkit's poller until it is drained (as
//! [`crate::head_of_line`] runs them: jobs that sleep, so the figures are the limits', not
//! the CPU's). Three cases one after another, each on a job, limit and records of its own:
//! no limit, a shared limit of 4 at once, and 2 at once per tenant over 5 tenants.
//!
//! The processors' clients go through the counting forwarder ([`crate::wire`]) and their
//! requests are counted as the throughput section counts them; the harness's own (sending,
//! reading the records) go to LocalStack directly. Powertools for AWS Lambda has no
//! concurrency or rate limit, so the peer's cells say so.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use schedkit::catalog::Catalog;
use schedkit::poller::{self, PollOptions, PollStats};
use schedkit::{Ctx, DynamoStore, Envelope, ExecutionRecord, Jobs, Metrics, Processor, Status};
use schedkit_testkit::{Stack, unique};
use serde_json::json;

use crate::report::{Better, Row, Section};
use crate::throughput;
use crate::wire::WireCounter;

/// What the peer's cells say.
pub const PEER_HAS_NONE: &str = "none (the peer has no limit)";

/// How long each run's job awaits: 50 ms, but a second under the per-tenant limit (the
/// issue's case: three pollers, one-second runs over five tenants at two per tenant).
const JOB_TIME: Duration = Duration::from_millis(50);
const TENANT_JOB_TIME: Duration = Duration::from_secs(1);
/// Processors polling the queue, each with the worker's default of 10 messages in hand.
const PROCESSORS: usize = 3;
/// Runs at once under the shared limit.
const SHARED: u32 = 4;
/// Runs at once per tenant, and the tenants the runs are spread over.
const PER_TENANT: u32 = 2;
const TENANTS: usize = 5;

/// What limits the job's runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Case {
    NoLimit,
    Shared,
    PerTenant,
}

impl Case {
    pub const ALL: [Case; 3] = [Case::NoLimit, Case::Shared, Case::PerTenant];

    /// The runs per second the limit itself allows: its runs at once over the job's time.
    pub fn limit_pace(self) -> Option<f64> {
        let at_once = match self {
            Case::NoLimit => return None,
            Case::Shared => SHARED,
            Case::PerTenant => PER_TENANT * TENANTS as u32,
        };
        Some(f64::from(at_once) / self.job_time().as_secs_f64())
    }

    /// How long each of its runs' job awaits.
    pub fn job_time(self) -> Duration {
        match self {
            Case::PerTenant => TENANT_JOB_TIME,
            _ => JOB_TIME,
        }
    }

    pub fn label(self) -> String {
        match self {
            Case::NoLimit => "no limit".into(),
            Case::Shared => format!("a shared limit, {SHARED} at once"),
            Case::PerTenant => format!("{PER_TENANT} at once per tenant, {TENANTS} tenants"),
        }
    }

    /// The catalog of `job` in this case, in the catalog's own terms.
    fn catalog(self, job: &str) -> String {
        let (shared, own) = match self {
            Case::NoLimit => (String::new(), String::new()),
            Case::Shared => (
                format!("[limits.{job}-api]\nconcurrency = {SHARED}\n\n"),
                format!("limits = [\"{job}-api\"]\n"),
            ),
            Case::PerTenant => (
                String::new(),
                format!("concurrency = {{ limit = {PER_TENANT}, key = \"{{tenant}}\" }}\n"),
            ),
        };
        format!("{shared}[jobs.{job}]\nowner = \"bench\"\npayload = {{ tenant = \"t0\" }}\n{own}")
    }
}

/// One case's figures.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Runs over the seconds from sending them to the last one's `finished_at`.
    pub runs_per_second: f64,
    pub dynamodb_per_run: f64,
    pub sqs_per_run: f64,
    /// Times a run was held back by its limit and looked again on a timer (outcome
    /// `throttled`), per run.
    pub throttled_per_run: f64,
    /// Times a run was held back by its limit and waited in the gate's line to be handed
    /// a permit (outcome `parked`), per run.
    pub parked_per_run: f64,
    /// The most runs at once of one group (all runs; a tenant's), from the records.
    pub most_at_once: usize,
}

/// Every case measured (none with `--flow-runs 0`), each round's figures.
#[derive(Debug, Clone, Default)]
pub struct FlowControl {
    pub runs: usize,
    pub cases: BTreeMap<Case, Vec<Measured>>,
}

/// Runs each case `rounds` times, the cases one after another in each round: a case of
/// 300 short runs lasts some seconds on LocalStack, whose pace varies by a tenth from one
/// run to the next, so the report gives the median and the spread.
pub async fn run(
    stack: &Stack,
    wire: &WireCounter,
    runs: usize,
    rounds: usize,
) -> anyhow::Result<FlowControl> {
    let mut out = FlowControl {
        runs,
        ..FlowControl::default()
    };
    if runs == 0 {
        return Ok(out);
    }
    println!(
        "flow control: {runs} runs of a 50 ms job (1 s per tenant), {PROCESSORS} polling processors, {rounds} rounds"
    );
    for case in (0..rounds.max(1)).flat_map(|_| Case::ALL) {
        let m = once(stack, wire, case, runs).await?;
        let pace = case
            .limit_pace()
            .map(|p| format!(" ({:.2} of the limit's {p:.0})", m.runs_per_second / p))
            .unwrap_or_default();
        println!(
            "  {:<32} {:>6.1} runs/s{pace}, {:.2} DynamoDB and {:.2} SQS requests per run, {:.2} timed looks and {:.2} parks per run, at most {} at once",
            case.label(),
            m.runs_per_second,
            m.dynamodb_per_run,
            m.sqs_per_run,
            m.throttled_per_run,
            m.parked_per_run,
            m.most_at_once
        );
        out.cases.entry(case).or_default().push(m);
    }
    Ok(out)
}

/// One case on an emptied stage: send the runs, poll until drained, read the records.
async fn once(
    stack: &Stack,
    wire: &WireCounter,
    case: Case,
    runs: usize,
) -> anyhow::Result<Measured> {
    stack.reset().await?;
    let job = unique("flow");
    let catalog = Catalog::parse(&case.catalog(&job), "bench.toml")?;
    let job_time = case.job_time();
    let registry = Jobs::new()
        .add(&job, move |_: Ctx| async move {
            tokio::time::sleep(job_time).await;
            Ok::<_, schedkit::JobError>(json!(null))
        })
        .bind(&catalog)?;
    let counted = |endpoint: String| {
        let ddb = stack.ddb.config().to_builder().endpoint_url(&endpoint);
        let sqs = stack.sqs.config().to_builder().endpoint_url(&endpoint);
        (
            aws_sdk_dynamodb::Client::from_conf(ddb.build()),
            aws_sdk_sqs::Client::from_conf(sqs.build()),
        )
    };
    let (ddb, sqs) = counted(wire.endpoint());
    let bodies: Vec<String> = (0..runs)
        .map(|i| {
            let mut e = Envelope::new(&job, "2026-12-02T09:00:00Z".parse().unwrap());
            e.key = Some(format!("{job}-{i}"));
            e.payload = json!({ "tenant": format!("t{}", i % TENANTS) })
                .as_object()
                .cloned();
            e.to_json()
        })
        .collect();
    let sent_at = Utc::now();
    // Sent at once: the batches of ten side by side, not one after another (300 runs'
    // thirty took 0.22 s of the shared case's first second on LocalStack).
    let sends = bodies
        .chunks(10)
        .map(|ten| stack.send_all(ten.iter().map(String::as_str)));
    futures::future::try_join_all(sends).await?;
    wire.take();
    let mut polls = tokio::task::JoinSet::new();
    for i in 0..PROCESSORS {
        let store = DynamoStore::new(ddb.clone(), &stack.table);
        let config = stack.config(&format!("flow-{i}"));
        let processor = Processor::new(
            store,
            sqs.clone(),
            registry.clone(),
            config,
            Metrics::capture().0,
        );
        polls.spawn(async move {
            let options = PollOptions {
                wait_seconds: 1,
                until_drained: true,
                ..PollOptions::default()
            };
            poller::poll(&processor, &options, std::future::pending()).await
        });
    }
    let limit = Duration::from_secs(120) + job_time * runs as u32 * 4;
    let stats: Vec<PollStats> = tokio::time::timeout(limit, polls.join_all())
        .await
        .with_context(|| format!("{}: not drained after {limit:?}", case.label()))?;
    let counts = wire.take();
    if std::env::var_os("SCHEDKIT_BENCH_COUNTS").is_some() {
        for ((operation, table), n) in &counts {
            println!(
                "    {operation} {table}: {:.2} a run",
                *n as f64 / runs as f64
            );
        }
    }
    let outcome = |label: &str| -> u64 { stats.iter().filter_map(|s| s.outcomes.get(label)).sum() };
    let (throttled, parked) = (outcome("throttled"), outcome("parked"));

    let records: Vec<ExecutionRecord> = stack
        .records()
        .await?
        .into_iter()
        .filter(|r| r.job == job)
        .collect();
    let done = records.iter().filter(|r| r.status == Status::Done).count();
    anyhow::ensure!(done == runs, "{}: {done} of {runs} runs DONE", case.label());
    let last = records
        .iter()
        .filter_map(|r| at(&r.finished_at))
        .max()
        .context("no run finished")?;
    Ok(Measured {
        runs_per_second: runs as f64 / (last - sent_at).as_seconds_f64(),
        dynamodb_per_run: throughput::per(&counts, runs, throughput::dynamodb),
        sqs_per_run: throughput::per(&counts, runs, throughput::sqs),
        throttled_per_run: throttled as f64 / runs as f64,
        parked_per_run: parked as f64 / runs as f64,
        most_at_once: most_at_once(&records, case),
    })
}

fn at(text: &Option<String>) -> Option<DateTime<Utc>> {
    text.as_deref()?.parse().ok()
}

/// The most runs of one group (a tenant's under the per-tenant limit, else all of them)
/// that ran at once, from the records' start and finish times: printed beside the figures,
/// so that a reader sees the limit held.
fn most_at_once(records: &[ExecutionRecord], case: Case) -> usize {
    let mut events: BTreeMap<String, Vec<(DateTime<Utc>, i32)>> = BTreeMap::new();
    for r in records {
        let (Some(start), Some(end)) = (at(&r.started_at), at(&r.finished_at)) else {
            continue;
        };
        let i: usize = r
            .execution_key
            .rsplit('-')
            .next()
            .and_then(|i| i.parse().ok())
            .unwrap_or(0);
        let group = match case {
            Case::PerTenant => format!("t{}", i % TENANTS),
            _ => String::new(),
        };
        let group = events.entry(group).or_default();
        group.extend([(start, 1), (end, -1)]);
    }
    events
        .into_values()
        .map(|mut events| {
            // An end before a start at the same instant: one gave its permit to the other.
            events.sort();
            let (mut now, mut most) = (0, 0);
            for (_, step) in events {
                now += step;
                most = most.max(now);
            }
            most as usize
        })
        .max()
        .unwrap_or(0)
}

impl FlowControl {
    fn of(&self, case: Case, f: impl Fn(&Measured) -> f64) -> Vec<f64> {
        self.cases.get(&case).into_iter().flatten().map(f).collect()
    }

    /// The report's section: schedkit's figures in each case, the peer's cells saying it
    /// has no limit. `theirs` is the peer's column title.
    pub fn section(&self, theirs: &str) -> Section {
        let none = self.of(Case::NoLimit, |m| m.runs_per_second);
        let mut rows = Vec::new();
        for case in Case::ALL {
            let row = |name: &str, digits, better, f: &dyn Fn(&Measured) -> f64| {
                let name = format!("{}: {name}", case.label());
                Row::new(name, digits, better).ours_only(self.of(case, f), PEER_HAS_NONE)
            };
            rows.push(row("runs per second", 1, Better::Higher, &|m| {
                m.runs_per_second
            }));
            if let Some(pace) = case.limit_pace() {
                let name = format!(
                    "{}: pace, runs per second ÷ the limit's own ({pace:.0}: at once ÷ job time)",
                    case.label()
                );
                let of_limit = self.of(case, |m| m.runs_per_second / pace);
                rows.push(Row::new(name, 2, Better::Higher).ours_only(of_limit, PEER_HAS_NONE));
            }
            if case == Case::Shared {
                let against = self
                    .of(case, |m| m.runs_per_second)
                    .iter()
                    .zip(&none)
                    .map(|(with, without)| with / without)
                    .collect();
                let name = format!("{}: runs per second ÷ no limit's", case.label());
                rows.push(Row::new(name, 2, Better::Higher).ours_only(against, PEER_HAS_NONE));
            }
            rows.push(row("DynamoDB requests per run", 2, Better::Lower, &|m| {
                m.dynamodb_per_run
            }));
            rows.push(row("SQS requests per run", 2, Better::Lower, &|m| {
                m.sqs_per_run
            }));
            rows.push(row("timed looks per run", 2, Better::Lower, &|m| {
                m.throttled_per_run
            }));
            rows.push(row(
                "waits in a gate's line per run",
                2,
                Better::Lower,
                &|m| m.parked_per_run,
            ));
            // That the limit held, from the records: not a speed, so no better side.
            rows.push(row(
                "most runs at once (of a tenant, where keyed)",
                0,
                Better::Lower,
                &|m| m.most_at_once as f64,
            ));
        }
        Section {
            title: format!(
                "Flow control: {} runs of a 50 ms job (1 s under the per-tenant limit) through {PROCESSORS} polling workers, with a limit and without",
                self.runs
            ),
            ours: "schedkit (its poller, in this process)".into(),
            theirs: theirs.into(),
            rows,
            notes: vec![
                format!(
                    "The runs are sent at once (their batches of ten side by side) and handled by {PROCESSORS} processors in this process (10 messages in hand each, the worker's default) polling the jobs queue until it is drained; the cases one after another, each on a job, limit and records of its own, in each of the rounds (medians, the spread in brackets). Runs per second: the runs over the time from sending them to the last record's `finished_at`; every run DONE, checked."
                ),
                "A run its limit holds back gives its claim back (not an attempt) and waits in the gate's line (its message hidden, woken by the run that frees a permit, which hands the permit on to it), or, with the line full, looks again on a timer (its message sent again with a delay of 1 to 3 s: a timed look). Requests are the processors', counted on the wire as in the throughput section (GetQueueAttributes, the poller's drained check, left out).".into(),
                "Powertools for AWS Lambda (Python) has no concurrency or rate limit, per job, per key or shared: its cells say none. The nearest it runs under is Lambda's, not the library's: the event source mapping's `MaximumConcurrency` (or reserved concurrency) caps all of a queue's jobs together.".into(),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_is_a_valid_catalog_with_its_limit() {
        for case in Case::ALL {
            let catalog = Catalog::parse(&case.catalog("flow-1"), "bench.toml")
                .unwrap_or_else(|e| panic!("{case:?}: {e}"));
            let flow = &catalog.jobs["flow-1"].policy.flow;
            assert_eq!(flow.any(), case != Case::NoLimit, "{case:?}: {flow:?}");
        }
    }
}
