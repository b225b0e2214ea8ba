//! Waiting behind a backlog (issue 39): how long one run waits to start when another
//! tenant's or a night's backlog was queued before it.
//!
//! - **A quiet tenant**: tenant `a` queues `runs` one-second runs under a shared limit of
//!   4 with `fair = "{tenant}"`; once the limit is full, tenant `b` sends one. Its wait,
//!   from its send to its record's `started_at`, in the job's durations: the issue asks for
//!   at most two with 1,000 queued before it.
//! - **An urgent run**: `urgent_runs` one-second runs of an unlimited job are queued; once
//!   they run, one of priority 10 is sent, as `fire` sends it: to the urgent queue beside
//!   the jobs queue (`schedkit::queue::urgent`). Its wait to start, in seconds: the issue
//!   asks for at most 2 s with 10,000 queued before it.
//!
//! Each case runs three processors in this process (as [`crate::flow_control`] does), stops
//! them once the run measured has started and empties the stage: the backlog's own pace is
//! the flow-control section's.

use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use schedkit::catalog::Catalog;
use schedkit::poller::{self, PollOptions};
use schedkit::queue::urgent::queue_for;
use schedkit::{Ctx, DynamoStore, Envelope, Jobs, Metrics, Processor, Registry};
use schedkit_testkit::{Stack, unique};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::report::{Better, Row, Section};

/// The job's duration in both cases.
pub const JOB_TIME: Duration = Duration::from_secs(1);
/// Processors polling the queue.
const PROCESSORS: usize = 3;
/// The shared limit the quiet tenant's run waits under.
const SHARED: u32 = 4;
/// The urgent run's priority (the catalog's highest).
const URGENT: i32 = 10;
/// How long the measured run may wait before the case gives up.
const GIVE_UP: Duration = Duration::from_secs(600);

/// The two waits measured.
#[derive(Debug, Clone, Default)]
pub struct Backlog {
    /// Runs queued before the quiet tenant's.
    pub runs: usize,
    /// Runs queued before the urgent one.
    pub urgent_runs: usize,
    /// The quiet tenant's run's wait to start.
    pub quiet_wait: Option<Duration>,
    /// The urgent run's wait to start.
    pub urgent_wait: Option<Duration>,
}

/// Measures both cases, one after the other (a case with no runs before it is skipped).
pub async fn run(stack: &Stack, runs: usize, urgent_runs: usize) -> anyhow::Result<Backlog> {
    let mut out = Backlog {
        runs,
        urgent_runs,
        ..Backlog::default()
    };
    if runs > 0 {
        println!(
            "behind a backlog: {runs} one-second runs of tenant a queued first, {PROCESSORS} polling processors"
        );
        let quiet = quiet_tenant(stack, runs).await?;
        println!(
            "  a quiet tenant's run behind them (shared limit of {SHARED}, fair by tenant): started {:.2} s after it was sent ({:.1} job durations)",
            quiet.as_secs_f64(),
            quiet.as_secs_f64() / JOB_TIME.as_secs_f64()
        );
        out.quiet_wait = Some(quiet);
    }
    if urgent_runs > 0 {
        println!(
            "behind a backlog: {urgent_runs} one-second runs queued first, {PROCESSORS} polling processors"
        );
        let urgent = urgent_run(stack, urgent_runs).await?;
        println!(
            "  a run of priority {URGENT} behind them (no limit): started {:.2} s after it was sent",
            urgent.as_secs_f64()
        );
        out.urgent_wait = Some(urgent);
    }
    Ok(out)
}

/// Tenant `a`'s backlog under a fair shared limit, then tenant `b`'s one run.
async fn quiet_tenant(stack: &Stack, runs: usize) -> anyhow::Result<Duration> {
    let job = unique("fair");
    let catalog = format!(
        "[limits.{job}-api]\nconcurrency = {SHARED}\nfair = \"{{tenant}}\"\n\n\
         [jobs.{job}]\nowner = \"bench\"\npayload = {{ tenant = \"a\" }}\nlimits = [\"{job}-api\"]\n"
    );
    let backlog = (0..runs).map(|i| body(&job, &format!("{job}-a-{i}"), "a", None));
    let last = body(&job, &format!("{job}-b"), "b", None);
    waited(
        stack,
        &job,
        &catalog,
        backlog.collect(),
        (&format!("{job}-b"), last, &stack.queue_url),
    )
    .await
}

/// A backlog of an unlimited job, then one run of the highest priority.
async fn urgent_run(stack: &Stack, runs: usize) -> anyhow::Result<Duration> {
    let job = unique("urgent");
    let catalog = format!("[jobs.{job}]\nowner = \"bench\"\n");
    let backlog = (0..runs).map(|i| body(&job, &format!("{job}-{i}"), "a", None));
    let key = format!("{job}-urgent");
    let last = body(&job, &key, "a", Some(URGENT));
    let urgent = stack.urgent_queue_url();
    let queue = queue_for(&stack.queue_url, Some(&urgent), URGENT);
    waited(
        stack,
        &job,
        &catalog,
        backlog.collect(),
        (&key, last, queue),
    )
    .await
}

fn body(job: &str, key: &str, tenant: &str, priority: Option<i32>) -> String {
    let mut e = Envelope::new(job, "2026-12-02T09:00:00Z".parse().unwrap());
    e.key = Some(key.to_string());
    e.payload = json!({ "tenant": tenant }).as_object().cloned();
    e.priority = priority;
    e.to_json()
}

/// Queues `backlog`, starts the processors, waits until the backlog runs (its first run
/// started, and one job duration more, so that a limit is full), sends `last` to `queue`
/// and waits for its start: how long after its send it started. The stage is emptied
/// after.
async fn waited(
    stack: &Stack,
    job: &str,
    catalog: &str,
    backlog: Vec<String>,
    (key, last, queue): (&str, String, &str),
) -> anyhow::Result<Duration> {
    stack.reset().await?;
    let catalog = Catalog::parse(catalog, "bench.toml")?;
    let registry = Jobs::new()
        .add(job, |_: Ctx| async {
            tokio::time::sleep(JOB_TIME).await;
            Ok::<_, schedkit::JobError>(json!(null))
        })
        .bind(&catalog)?;
    stack.send_all(backlog.iter().map(String::as_str)).await?;
    let (stop, polls) = pollers(stack, &registry);
    let started = |record: Option<schedkit::ExecutionRecord>| {
        record.and_then(|r| {
            r.started_at
                .as_deref()
                .and_then(|t| t.parse::<DateTime<Utc>>().ok())
        })
    };
    let deadline = tokio::time::Instant::now() + GIVE_UP;
    let any_running = async {
        loop {
            let running = stack
                .records()
                .await?
                .into_iter()
                .any(|r| r.job == job && r.started_at.is_some());
            if running {
                return anyhow::Ok(());
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "the backlog never ran"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    any_running.await?;
    tokio::time::sleep(JOB_TIME).await;
    let sent = Utc::now();
    stack
        .sqs
        .send_message()
        .queue_url(queue)
        .message_body(&last)
        .send()
        .await?;
    let start = loop {
        let record = stack.record(key).await?;
        let claimed = record.as_ref().map(|r| r.created_at.clone());
        if let Some(at) = started(record) {
            // How long the queue took to bring it to a worker, and the gate to let it in.
            if let Some(claimed) = claimed.and_then(|c| c.parse::<DateTime<Utc>>().ok()) {
                let (met, let_in) = (claimed - sent, at - claimed);
                println!(
                    "  met by a worker {:.2} s after its send, started {:.2} s after that",
                    met.as_seconds_f64(),
                    let_in.as_seconds_f64()
                );
            }
            break at;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "`{key}` never started"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stop.send(true).ok();
    polls.join_all().await;
    stack.reset().await?;
    (start - sent)
        .to_std()
        .context("the run started before it was sent: the clocks disagree")
}

/// `PROCESSORS` processors polling the stage's queue until told to stop.
fn pollers(stack: &Stack, registry: &Registry) -> (watch::Sender<bool>, JoinSet<()>) {
    let (stop, stopped) = watch::channel(false);
    let mut polls = JoinSet::new();
    for i in 0..PROCESSORS {
        let store = DynamoStore::new(stack.ddb.clone(), &stack.table);
        let processor = Processor::new(
            store,
            stack.sqs.clone(),
            registry.clone(),
            stack.config(&format!("backlog-{i}")),
            Metrics::capture().0,
        );
        let mut stopped = stopped.clone();
        polls.spawn(async move {
            let options = PollOptions {
                wait_seconds: 1,
                ..PollOptions::default()
            };
            let stop = async move {
                stopped.wait_for(|s| *s).await.ok();
            };
            poller::poll(&processor, &options, stop).await;
        });
    }
    (stop, polls)
}

impl Backlog {
    /// The report's section: each wait, the peer's cells saying it has neither fair shares
    /// nor priorities.
    pub fn section(&self, theirs: &str) -> Section {
        let secs = |w: Option<Duration>| w.map(|w| w.as_secs_f64()).into_iter().collect();
        let durations = |w: Option<Duration>| {
            w.map(|w| w.as_secs_f64() / JOB_TIME.as_secs_f64())
                .into_iter()
                .collect()
        };
        let none = "none (the peer has neither fair shares nor priorities)";
        Section {
            title: format!(
                "Behind a backlog: one run sent after {} (a quiet tenant's) or {} (an urgent run) one-second runs, {PROCESSORS} polling workers",
                self.runs, self.urgent_runs
            ),
            ours: "schedkit (its poller, in this process)".into(),
            theirs: theirs.into(),
            rows: vec![
                Row::new(
                    format!("a quiet tenant's run under a shared fair limit of {SHARED}: its wait to start, in job durations"),
                    1,
                    Better::Lower,
                )
                .ours_only(durations(self.quiet_wait), none),
                Row::new(
                    format!("a run of priority {URGENT}, no limit: its wait to start, s"),
                    2,
                    Better::Lower,
                )
                .ours_only(secs(self.urgent_wait), none),
            ],
            notes: vec![
                "The backlog is queued and running (its first run started a job's duration before) when the run measured is sent; its wait is from its send to its record's `started_at`. The processors are stopped and the stage emptied once it started.".into(),
                "The urgent run is sent as `fire` sends a run of positive priority: to the urgent queue beside the jobs queue, on which each poller keeps a receive open.".into(),
            ],
        }
    }
}
