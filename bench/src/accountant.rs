//! The accountant (issue 26): what a check of a stage costs. A catalog of `jobs` hourly
//! jobs (each at its own minute), a day of their runs DONE in the table, and the check
//! run as the stage runs it: every 5 minutes (its span is the 5 minutes and the longest
//! deadline before them: only the jobs with a firing in it are read), and once over the
//! whole day (a check after the accountant was down, or `worker --account --account-since`).
//! DynamoDB requests counted on the wire, milliseconds by the clock, per check and per
//! expected firing. Powertools for AWS Lambda has no accountant: the peer's cells say so.

use std::time::{Duration, Instant};

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use schedkit::DynamoStore;
use schedkit::accounting::stage::check;
use schedkit::catalog::Catalog;
use schedkit_testkit::Stack;

use crate::report::{Better, Row, Section};
use crate::seed;
use crate::stats::median;
use crate::throughput;
use crate::wire::WireCounter;

/// What the peer's cells say.
pub const PEER_HAS_NONE: &str = "none (the peer has no accountant)";

/// The two spans a check reads.
const CASES: [(&str, TimeDelta); 2] = [
    ("a check every 5 minutes", TimeDelta::minutes(5)),
    ("one check over the day", TimeDelta::hours(24)),
];

/// One case's figures, one sample per round.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub ms: Vec<f64>,
    pub requests: Vec<f64>,
    pub expected: Vec<f64>,
}

/// Both cases (none with `--accountant-jobs 0`).
#[derive(Debug, Clone, Default)]
pub struct AccountantCost {
    pub jobs: usize,
    pub records: usize,
    pub cases: Vec<(&'static str, Measured)>,
}

/// The catalog: `jobs` hourly jobs, job `i` at minute `i % 60`, anchored in UTC.
fn catalog(jobs: usize) -> String {
    (0..jobs)
        .map(|i| {
            format!(
                "[jobs.hourly-{i}]\nowner = \"bench\"\n[jobs.hourly-{i}.schedule]\nexpression = \"cron({} * * * ? *)\"\n\n",
                i % 60
            )
        })
        .collect()
}

/// Writes a DONE record for every firing of the catalog in the day before `now`.
async fn a_day_of_records(
    stack: &Stack,
    catalog: &Catalog,
    now: DateTime<Utc>,
) -> anyhow::Result<usize> {
    let template = seed::done_record(&stack.store()).await?;
    let firings = schedkit::accounting::expected(
        catalog,
        now - TimeDelta::hours(25),
        now,
        Duration::ZERO,
        |_, _| false,
    );
    let records = firings.iter().map(|f| {
        let mut r = template.clone();
        r.execution_key = f.key.clone();
        r.job = f.name.clone();
        r.scheduled_for = f
            .scheduled_for
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        r
    });
    seed::put_records(stack, records).await?;
    Ok(firings.len())
}

/// Measures each case `rounds` times, alternating, on a table of its own.
pub async fn run(
    stack: &Stack,
    wire: &WireCounter,
    jobs: usize,
    rounds: usize,
) -> anyhow::Result<AccountantCost> {
    let mut out = AccountantCost {
        jobs,
        ..AccountantCost::default()
    };
    if jobs == 0 {
        return Ok(out);
    }
    stack.reset().await?;
    let catalog = Catalog::parse(&catalog(jobs), "bench.toml")?;
    let now = Utc::now().duration_trunc(TimeDelta::minutes(1))?;
    out.records = a_day_of_records(stack, &catalog, now).await?;
    println!(
        "accountant: {jobs} hourly jobs, {} DONE records of a day",
        out.records
    );
    let ddb = stack
        .ddb
        .config()
        .to_builder()
        .endpoint_url(wire.endpoint())
        .build();
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(ddb), &stack.table);
    let mut cases: Vec<(&'static str, Measured)> = CASES
        .iter()
        .map(|(label, _)| (*label, Measured::default()))
        .collect();
    for round in 0..rounds {
        for (i, (_, span)) in CASES.iter().enumerate() {
            // Each round a minute later, so the 5-minute spans read different jobs.
            let at = now + TimeDelta::minutes(round as i64);
            // Each check as a stage's first (judging from `since`): no ledger of the one
            // before (whose watched schedules would start later than the day's span).
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
            wire.take();
            let started = Instant::now();
            let found = check(&store, &catalog, at, Some(at - *span), true).await?;
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            let counts = wire.take();
            anyhow::ensure!(
                found.findings.is_empty(),
                "every firing has its DONE run, yet: {:?}",
                found.findings
            );
            let requests = throughput::per(&counts, 1, throughput::dynamodb);
            let m = &mut cases[i].1;
            m.ms.push(ms);
            m.requests.push(requests);
            m.expected.push(found.expected as f64);
        }
    }
    for (label, m) in &cases {
        println!(
            "  {label:<26} {:>7.1} ms, {:>5.0} DynamoDB requests, {:>5.0} firings in its span",
            median(&m.ms),
            median(&m.requests),
            median(&m.expected)
        );
    }
    out.cases = cases;
    Ok(out)
}

impl AccountantCost {
    /// The report's section; `theirs` is the peer's column title.
    pub fn section(&self, theirs: &str) -> Section {
        let mut rows = Vec::new();
        for (label, m) in &self.cases {
            let per = |values: &[f64]| -> Vec<f64> {
                values
                    .iter()
                    .zip(&m.expected)
                    .map(|(v, e)| v / e.max(1.0))
                    .collect()
            };
            let row = |name: &str, digits, samples: Vec<f64>| {
                Row::new(format!("{label}: {name}"), digits, Better::Lower)
                    .ours_only(samples, PEER_HAS_NONE)
            };
            rows.push(row("milliseconds per check", 1, m.ms.clone()));
            rows.push(row("DynamoDB requests per check", 0, m.requests.clone()));
            rows.push(row("firings it judges", 0, m.expected.clone()));
            rows.push(row("milliseconds per expected firing", 3, per(&m.ms)));
            rows.push(row(
                "DynamoDB requests per expected firing",
                3,
                per(&m.requests),
            ));
        }
        Section {
            title: format!(
                "The accountant: a catalog of {} scheduled jobs, a day of their runs",
                self.jobs
            ),
            ours: "schedkit (the accountant's check, in this process)".into(),
            theirs: theirs.into(),
            rows,
            notes: vec![
                format!(
                    "{} hourly jobs, each at its own minute, and a DONE record for each of their {} firings of the day before the check. The check reads its ledger, the jobs' pauses (one BatchGetItem per 50 jobs), the runs of the firings in its span by key (a hundred to a BatchGetItem), the jobs with runs FAILED since its last check (one query of `open-by-status`), and writes its ledger: nothing scans the table.",
                    self.jobs, self.records
                ),
                "Every 5 minutes: the firings whose window or deadline ended in the 5 minutes since the last check, so only the jobs with one are read. Over the day: one check judging 24 hours at once, as after the accountant was down or with `worker --account --account-since`. Each check is measured as a stage's first (its ledger removed before it).".into(),
                "Requests counted on the wire (the counting forwarder); milliseconds by the clock around the check, against LocalStack on this machine: DynamoDB's own latency on AWS differs.".into(),
                "Powertools for AWS Lambda has no accountant (no check that scheduled runs happened): its cells say none.".into(),
            ],
        }
    }
}
