//! The simulated world of one seed: its catalog, its messages, its workers and the faults
//! that befall them, all drawn from the seed; what happened, for the invariants.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use aws_sdk_dynamodb::types::{AttributeValue, Put};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use schedkit::batch::Chains;
use schedkit::batch::MessageReport;
use schedkit::catalog::Catalog;
use schedkit::orchestrator::{Answer, MemoryOrchestrator};
use schedkit::poller::{self, OnReport, PollOptions};
use schedkit::queue::{MemoryQueue, Outgoing};
use schedkit::store::{CancelRequest, Fault, Faults, MemoryState, MemoryStore, is_internal};
use schedkit::trigger::pause::MemorySchedules;
use schedkit::{
    Clock, Ctx, Envelope, JobError, JobPolicy, Jobs, Metrics, Overlap, Processor, ProcessorConfig,
    Registry, RetryPolicy, Status,
};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::{Duration, Instant};

use super::chain_operator::{ChainActs, ChainOperator, Picked};
use super::conductor::Conductor;
use super::granted;
use super::limits;
use super::pauses::{self, PauseReport};

/// An effect committed with the outcome.
pub const INVOICE: &str = "invoice";
/// Fails retryably at random; three attempts.
pub const FLAKY: &str = "flaky";
/// Fails for good.
pub const BROKEN: &str = "broken";
/// Runs past its lease, kept by heartbeats.
pub const SLOW: &str = "slow";
/// `overlap = "skip"`; its first attempt fails now and then, retried at once.
pub const EXCLUSIVE: &str = "exclusive";
/// `overlap = "buffer_one"`.
pub const QUEUED: &str = "queued";
pub const JOBS: [&str; 6] = [INVOICE, FLAKY, BROKEN, SLOW, EXCLUSIVE, QUEUED];
/// The world's own table where invoices' effects land (the "external system"): the
/// invariants read its items, not a count the store keeps.
pub const EFFECTS: &str = "effects";

/// Two stages: `collect` (an invoice), then `bill` (flaky) beside `tally` (an invoice) and
/// `settle` (exclusive); ends DONE, or PAUSED when `bill` fails three times.
pub const CLOSE: &str = "close";
/// One stage: `check` (broken) beside `ledger` (an invoice); always PAUSED on `check`.
pub const AUDIT: &str = "audit";
pub const CHAINS: [&str; 2] = [CLOSE, AUDIT];

/// The catalog's chains (its jobs are there for the chains' checks; their policies are
/// the registry's). `settle` runs `exclusive`, whose registered policy skips overlapping
/// runs: the catalog would refuse that (a skipped step could never run), so here it does
/// not say so, and the worker's own rule is what keeps the step from being skipped.
const CATALOG: &str = r#"
[jobs.invoice]
owner = "sim"
[jobs.flaky]
owner = "sim"
[jobs.broken]
owner = "sim"
[jobs.exclusive]
owner = "sim"

[chains.close]
owner = "sim"
stages = ["collect", ["bill", "tally", "settle"]]
[chains.close.steps.collect]
job = "invoice"
[chains.close.steps.bill]
job = "flaky"
[chains.close.steps.tally]
job = "invoice"
[chains.close.steps.settle]
job = "exclusive"

[chains.audit]
owner = "sim"
stages = [["check", "ledger"]]
[chains.audit.steps.check]
job = "broken"
[chains.audit.steps.ledger]
job = "invoice"
"#;

/// The redrive policy's receives (the template's attempts + 10).
const MAX_RECEIVES: u32 = 15;
/// How long the world may run before it counts as not drained.
const GIVE_UP: Duration = Duration::from_secs(3 * 3600);

/// One random source for the whole world.
#[derive(Debug, Clone)]
pub(super) struct Draw(pub(super) Arc<Mutex<StdRng>>);

impl Draw {
    pub(super) fn lock(&self) -> MutexGuard<'_, StdRng> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub(super) fn chance(&self, p: f64) -> bool {
        self.lock().random_bool(p)
    }
    pub(super) fn millis(&self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.lock().random_range(lo..hi))
    }
    pub(super) fn below(&self, n: usize) -> usize {
        self.lock().random_range(0..n)
    }
}

/// What happened, in order, with the simulated time.
#[derive(Debug, Clone)]
pub struct Trace {
    pub(super) lines: Arc<Mutex<Vec<String>>>,
    pub(super) start: Instant,
}

impl Trace {
    pub fn say(&self, line: impl fmt::Display) {
        let at = self.start.elapsed().as_secs_f64();
        self.lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("{at:>9.3}s {line}"));
    }
}

/// Store faults drawn from the seed: a delay on every request, now and then a slow one, a
/// refusal or a lost answer.
#[derive(Debug)]
pub(super) struct SeededFaults {
    pub(super) draw: Draw,
    pub(super) trace: Trace,
    /// Every request in the trace, not only the faulty ones (`SCHEDKIT_SIM_VERBOSE`).
    pub(super) verbose: bool,
    pub(super) refused: f64,
    pub(super) lost: f64,
    /// Applied, the answer lost, and sent again by the SDK: the second try's answer.
    pub(super) retried: f64,
    /// The share of requests that take seconds: rare in most worlds, common in some (a
    /// rare interleaving made common, FoundationDB's "buggify").
    pub(super) slow: f64,
    /// The share held up longer than any lease of the world (a process paused, a network
    /// partition): the request lands after its lease ran out and another worker may have
    /// claimed the run, so only the fencing check keeps a stale owner's write out.
    pub(super) stalled: f64,
}

impl Faults for SeededFaults {
    fn request(&self, request: &'static str, key: &str) -> (Duration, Fault) {
        let mut delay = self.draw.millis(1, 30);
        if self.draw.chance(self.slow) {
            delay = self.draw.millis(1_000, 4_000);
        }
        // Drawn only in a world that stalls: a draw of p = 0 still takes a number from the
        // seed, and the flow-control world's seeds would then draw otherwise.
        if self.stalled > 0.0 && self.draw.chance(self.stalled) {
            delay = self.draw.millis(5_000, 9_000);
        }
        let fault = if self.draw.chance(self.refused) {
            Fault::Unavailable
        } else if self.draw.chance(self.lost) {
            Fault::LoseAnswer
        } else if self.draw.chance(self.retried) {
            Fault::Retried
        } else {
            Fault::None
        };
        if fault != Fault::None || self.verbose {
            self.trace
                .say(format!("store {request} {key}: {fault:?}, {delay:?}"));
        }
        (delay, fault)
    }
}

/// What the jobs' bodies saw.
#[derive(Debug, Default)]
pub struct Observed {
    /// Bodies of each job running right now.
    running: BTreeMap<&'static str, u32>,
    /// The most bodies of each job that ever ran at once.
    pub most_at_once: BTreeMap<&'static str, u32>,
    /// Bodies started, by key.
    pub runs: BTreeMap<String, u32>,
}

/// Counts a body as running until dropped (ended or cancelled).
struct Running {
    observed: Arc<Mutex<Observed>>,
    job: &'static str,
    /// Which body of its key this is (1 for the first to start): what its effect carries,
    /// so that the world tells one body's effect from another's.
    body: u32,
}

impl Running {
    fn start(observed: &Arc<Mutex<Observed>>, job: &'static str, key: &str) -> Running {
        let mut o = observed.lock().unwrap_or_else(|p| p.into_inner());
        let now = {
            let n = o.running.entry(job).or_default();
            *n += 1;
            *n
        };
        let most = o.most_at_once.entry(job).or_default();
        *most = (*most).max(now);
        let body = o.runs.entry(key.to_string()).or_default();
        *body += 1;
        let body = *body;
        Running {
            observed: observed.clone(),
            job,
            body,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut o = self.observed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = o.running.get_mut(self.job) {
            *n -= 1;
        }
    }
}

/// The catalog: each job's policy.
fn policy_of(job: &str) -> JobPolicy {
    let policy = match job {
        SLOW => JobPolicy::default().with_lease(Duration::from_secs(2)),
        EXCLUSIVE => JobPolicy {
            overlap: Overlap::Skip,
            ..JobPolicy::default().with_lease(Duration::from_secs(4))
        },
        QUEUED => JobPolicy {
            overlap: Overlap::BufferOne,
            ..JobPolicy::default().with_lease(Duration::from_secs(4))
        },
        _ => JobPolicy::default().with_lease(Duration::from_secs(4)),
    };
    JobPolicy {
        retry: RetryPolicy {
            max_attempts: 3,
            // `exclusive` retries at once: its retry can meet its own slot entry while
            // the attempt that failed is still leaving it.
            first_delay: match job {
                EXCLUSIVE => Duration::ZERO,
                _ => RetryPolicy::default().first_delay,
            },
            ..RetryPolicy::default()
        },
        // Long enough for the long runs of `queued`.
        timeout: Some(Duration::from_secs(1800)),
        pause_after_failures: pauses::pause_after_failures(job),
        ..policy
    }
}

/// The catalog: each job's body, with its policy.
fn registry(
    draw: &Draw,
    observed: &Arc<Mutex<Observed>>,
    seen: &Arc<Mutex<limits::Seen>>,
    clock: Clock,
    trace: &Trace,
) -> Registry {
    let mut jobs = Jobs::new();
    // The flow-control world's limited jobs, with its catalog's limits and rate.
    for job in limits::JOBS {
        let (draw, observed, seen, trace) =
            (draw.clone(), observed.clone(), seen.clone(), trace.clone());
        jobs = jobs.add(job, move |ctx: Ctx| {
            let (draw, observed, seen, trace) =
                (draw.clone(), observed.clone(), seen.clone(), trace.clone());
            async move {
                let _running = Running::start(&observed, job, &ctx.key);
                limits::run_body(job, ctx, draw, seen, clock, trace).await
            }
        });
    }
    for job in JOBS {
        let (draw, observed, trace) = (draw.clone(), observed.clone(), trace.clone());
        jobs = jobs.add(job, move |ctx: Ctx| {
            let (draw, observed, trace) = (draw.clone(), observed.clone(), trace.clone());
            async move {
                // A chain's step never goes through its job's overlap policy: counted apart.
                let counted = if ctx.chain().is_some() { "step" } else { job };
                let running = Running::start(&observed, counted, &ctx.key);
                trace.say(format!("{} attempt {} runs", ctx.key, ctx.attempt));
                let takes = match job {
                    SLOW => draw.millis(3_000, 9_000),
                    // Now and then a run that holds its slot for minutes, kept by
                    // heartbeats, while another waits and looks again and again (every
                    // 30 s at most: up to twenty minutes, so that a waiter may look again
                    // more often than the queue's fifteen receives).
                    QUEUED if draw.chance(0.1) => draw.millis(300_000, 1_200_000),
                    _ => draw.millis(10, 2_500),
                };
                tokio::time::sleep(takes).await;
                match job {
                    INVOICE => {
                        // The effect lands in the world's own table (`EFFECTS`), each
                        // body's apart: an effect applied by two bodies is two items.
                        let put = Put::builder()
                            .table_name(EFFECTS)
                            .item("effect_key", AttributeValue::S(ctx.key.clone()))
                            .item("body", AttributeValue::N(running.body.to_string()))
                            .build()
                            .expect("table and item set");
                        ctx.effects().put(put);
                        Ok(json!({"applied": ctx.key}))
                    }
                    FLAKY if draw.chance(0.5) => Err(JobError::retryable("flaky")),
                    EXCLUSIVE if ctx.attempt == 1 && draw.chance(0.3) => {
                        Err(JobError::retryable("not yet"))
                    }
                    BROKEN => Err(JobError::permanent("broken for good")),
                    _ => Ok(json!(null)),
                }
            }
        });
    }
    let flow = limits::catalog();
    jobs.bind_policies(move |job| match flow.jobs.get(job) {
        Some(limited) => limited.policy.clone(),
        None => policy_of(job),
    })
}

/// What a message the world sends is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// A job's run; `conflict`: its key with another payload (refused as a key conflict).
    Run { key: String, conflict: bool },
    /// Not an envelope.
    Poison,
    /// A chain's trigger: its run `key`.
    Chain { key: String },
    /// A chain's end forged for the job run `key`: refused, the run left to its worker.
    ForgedEnd { key: String },
    /// A message whose explicit key names one of schedkit's own items: poison.
    InternalKey { key: String },
}

/// One message the world sends.
#[derive(Debug, Clone)]
pub struct Sent {
    pub what: What,
    pub body: String,
}

/// The messages of a seed: runs of every job, duplicates, a conflict, poison, chain
/// triggers (some twice) and a forged chain end.
fn messages(draw: &Draw) -> Vec<Sent> {
    let runs = 6 + draw.below(10);
    let mut out = Vec::new();
    let mut invoices = Vec::new();
    for i in 0..runs {
        let job = JOBS[draw.below(JOBS.len())];
        let key = format!("{job}-{i}");
        if job == INVOICE {
            invoices.push(key.clone());
        }
        let mut e = Envelope::new(job, "2026-12-02T09:00:00Z".parse().unwrap());
        e.key = Some(key.clone());
        e.payload = json!({"n": i}).as_object().cloned();
        let sent = Sent {
            what: What::Run {
                key: key.clone(),
                conflict: false,
            },
            body: e.to_json(),
        };
        if draw.chance(0.3) {
            out.push(sent.clone());
        }
        if draw.chance(0.08) {
            e.payload = json!({"n": i, "other": true}).as_object().cloned();
            out.push(Sent {
                what: What::Run {
                    key: key.clone(),
                    conflict: true,
                },
                body: e.to_json(),
            });
        }
        out.push(sent);
    }
    out.extend(chain_triggers(draw));
    if draw.chance(0.2) {
        out.push(Sent {
            what: What::Poison,
            body: "poison: not an envelope".into(),
        });
    }
    if !invoices.is_empty() && draw.chance(0.3) {
        let key = invoices[draw.below(invoices.len())].clone();
        out.push(forged_end(&key));
    }
    if draw.chance(0.15) {
        out.push(internal_key(draw));
    }
    out
}

/// Runs of the limited jobs, each at its time, from a draw of their own (so the rest of the
/// world draws what it drew without them): tenants `a` and `b`, some sent twice.
fn limited_runs(flow: &Draw) -> Vec<(Duration, Sent)> {
    let mut out = Vec::new();
    for i in 0..2 + flow.below(8) {
        let job = limits::JOBS[flow.below(limits::JOBS.len())];
        let key = format!("{job}-{i}");
        let mut e = Envelope::new(job, "2026-12-02T09:00:00Z".parse().unwrap());
        e.key = Some(key.clone());
        let tenant = ["a", "b"][flow.below(2)];
        e.payload = json!({ "tenant": tenant }).as_object().cloned();
        let sent = Sent {
            what: What::Run {
                key,
                conflict: false,
            },
            body: e.to_json(),
        };
        if flow.chance(0.2) {
            out.push((flow.millis(0, 30_000), sent.clone()));
        }
        out.push((flow.millis(0, 30_000), sent));
    }
    // Now and then a burst of `impatient` (one at a time, 20 s of `max_wait`): the last
    // ones wait past it and end FAILED as `limit-wait`.
    if flow.chance(0.3) {
        let at = flow.millis(0, 20_000);
        for i in 0..4 + flow.below(4) {
            let key = format!("impatient-burst-{i}");
            let mut e = Envelope::new("impatient", "2026-12-02T09:00:00Z".parse().unwrap());
            e.key = Some(key.clone());
            let what = What::Run {
                key,
                conflict: false,
            };
            out.push((
                at + flow.millis(0, 2_000),
                Sent {
                    what,
                    body: e.to_json(),
                },
            ));
        }
    }
    out
}

/// A run whose explicit key names a job's overlap slot or its pause-and-streak item.
fn internal_key(draw: &Draw) -> Sent {
    let job = JOBS[draw.below(JOBS.len())];
    let key = match draw.chance(0.5) {
        true => format!(".schedkit/overlap/{EXCLUSIVE}"),
        false => format!(".schedkit/job/{job}"),
    };
    let mut e = Envelope::new(job, "2026-12-02T09:00:00Z".parse().unwrap());
    e.key = Some(key.clone());
    Sent {
        what: What::InternalKey { key },
        body: e.to_json(),
    }
}

/// Now and then, firings of `exclusive` close together (a schedule whose runs overlap):
/// each meets the slot of the one before, some while it is being retried.
fn exclusive_burst(draw: &Draw) -> Vec<(Duration, Sent)> {
    if !draw.chance(0.4) {
        return Vec::new();
    }
    let mut at = draw.millis(0, 25_000);
    (0..3 + draw.below(3))
        .map(|i| {
            at += draw.millis(300, 2_000);
            let key = format!("{EXCLUSIVE}-burst-{i}");
            let mut e = Envelope::new(EXCLUSIVE, "2026-12-02T09:00:00Z".parse().unwrap());
            e.key = Some(key.clone());
            let what = What::Run {
                key,
                conflict: false,
            };
            (
                at,
                Sent {
                    what,
                    body: e.to_json(),
                },
            )
        })
        .collect()
}

/// Up to two runs of each chain, a trigger sent twice now and then.
fn chain_triggers(draw: &Draw) -> Vec<Sent> {
    let mut out = Vec::new();
    for chain in CHAINS {
        for minute in 0..draw.below(3) {
            let at = format!("2026-12-02T09:0{minute}:00Z");
            let e = Envelope::new(chain, at.parse().unwrap());
            let sent = Sent {
                what: What::Chain {
                    key: format!("{chain}#{at}"),
                },
                body: e.to_json(),
            };
            if draw.chance(0.3) {
                out.push(sent.clone());
            }
            out.push(sent);
        }
    }
    out
}

/// A chain's `done` end naming the job run `key` (a sender that can write to the jobs
/// queue, or a bug): the worker must refuse it and leave the run to its own worker.
fn forged_end(key: &str) -> Sent {
    let body = json!({
        "job": CLOSE,
        "scheduled_for": "2026-12-02T09:00:00Z",
        "chain": {"name": CLOSE, "key": key, "outcome": "done", "execution": format!("{key}-1")},
    });
    Sent {
        what: What::ForgedEnd {
            key: key.to_string(),
        },
        body: body.to_string(),
    }
}

/// Everything the invariants read.
#[derive(Debug)]
pub struct Report {
    pub trace: Vec<String>,
    pub sent: Vec<Sent>,
    pub store: MemoryState,
    pub dead_letters: Vec<Outgoing>,
    pub left_in_queue: usize,
    pub observed: Observed,
    pub outcomes: BTreeMap<String, u64>,
    pub kills: u32,
    /// Dead letters moved back to the queue.
    pub redrives: u32,
    /// The keys (or bodies, for poison) of the letters redriven.
    pub redriven: BTreeSet<String>,
    /// Every task answer the worker gave, in order.
    pub answers: Vec<(String, Answer)>,
    /// Every task token Step Functions handed out, with its step's key.
    pub tasks: BTreeMap<String, String>,
    /// The operator's pauses and resumes, and the schedules after the final sync.
    pub pauses: PauseReport,
    /// What the limited jobs' bodies saw.
    pub seen: limits::Seen,
    /// Gates a new run could not take once every run was decided.
    pub kept: Vec<String>,
    /// The runs the operator cancelled (chain runs with their steps' keys).
    pub cancelled: BTreeSet<String>,
    /// The chain commands that completed.
    pub chain_acts: ChainActs,
    /// Chain commands that never completed, however often taken again.
    pub stuck: Vec<String>,
    /// What cancelled chain runs did after their cancel completed that they must not: an
    /// execution left running or started, a step DONE.
    pub after_cancels: Vec<String>,
    /// The IAM actions of the workers' Step Functions calls.
    pub worker_actions: BTreeSet<&'static str>,
}

/// A worker: a processor and the poller that feeds it, on its own clock.
fn spawn_worker(
    name: String,
    world: &World,
    outcomes: &Arc<Mutex<BTreeMap<String, u64>>>,
) -> JoinHandle<()> {
    let skew = world.draw.lock().random_range(-200..=200);
    let config = ProcessorConfig {
        queue_url: "memory://jobs".into(),
        dlq_url: "memory://dlq".into(),
        concurrency: 4,
        worker_id: name.clone(),
        clock_skew: Duration::from_millis(500),
        clock: world.clock.shifted_by_ms(skew),
        visibility_on_claim: false,
        auto_pause: Some(pauses::auto_pause(&world.schedules, &world.store)),
        chains: Some(world.chains.clone()),
    };
    let seed = world.draw.lock().random();
    let processor = Processor::with_queue(
        world.store.clone(),
        world.queue.clone(),
        world.registry.clone(),
        config,
        Metrics::capture().0,
    )
    .seeded(seed);
    // The worker's own poller: it receives (up to its concurrency in hand), hands each
    // message to the processor and deletes the acknowledged ones, through the queue.
    let (trace, outcomes) = (world.trace.clone(), outcomes.clone());
    let hear = move |report: &MessageReport| {
        let label = report.outcome.label();
        trace.say(format!("{name} {}: {label}", report.message_id));
        *outcomes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(label.to_string())
            .or_default() += 1;
    };
    let options = PollOptions {
        on_report: Some(OnReport(Arc::new(hear))),
        ..PollOptions::default()
    };
    tokio::spawn(async move {
        poller::poll(&processor, &options, std::future::pending()).await;
    })
}

/// What the workers share.
struct World {
    draw: Draw,
    trace: Trace,
    store: MemoryStore,
    queue: MemoryQueue,
    registry: Registry,
    /// The world's wall clock, from the start; each worker reads it with its own skew.
    clock: Clock,
    /// The catalog's chains over the world's Step Functions.
    chains: Chains,
    orchestrator: MemoryOrchestrator,
    /// The stage's schedules, which pauses switch off and on.
    schedules: MemorySchedules,
}

/// Runs the world of `seed` until its queue is drained (or [`GIVE_UP`]).
pub async fn run(seed: u64) -> Report {
    let draw = Draw(Arc::new(Mutex::new(StdRng::seed_from_u64(seed))));
    let trace = Trace {
        lines: Arc::default(),
        start: Instant::now(),
    };
    let observed = Arc::new(Mutex::new(Observed::default()));
    let seen = Arc::new(Mutex::new(limits::Seen::default()));
    let clock = Clock::following_tokio("2026-12-02T09:00:00Z".parse().unwrap());
    let faults: Arc<dyn Faults> = Arc::new(SeededFaults {
        draw: draw.clone(),
        trace: trace.clone(),
        verbose: std::env::var_os("SCHEDKIT_SIM_VERBOSE").is_some(),
        refused: if draw.chance(0.5) { 0.03 } else { 0.0 },
        lost: if draw.chance(0.5) { 0.03 } else { 0.0 },
        retried: if draw.chance(0.5) { 0.03 } else { 0.0 },
        slow: if draw.chance(0.3) { 0.05 } else { 0.005 },
        stalled: if draw.chance(0.3) { 0.01 } else { 0.0 },
    });
    let catalog = Catalog::parse(CATALOG, "simulation.toml").expect("the simulation's catalog");
    let orchestrator = MemoryOrchestrator::default();
    let machines: BTreeMap<String, String> = CHAINS
        .iter()
        .map(|c| (c.to_string(), format!("machine:{c}")))
        .collect();
    let worker_actions = granted::Actions::default();
    let recorded = granted::Recorded {
        inner: orchestrator.clone(),
        actions: worker_actions.clone(),
    };
    let world = World {
        chains: Chains::with_orchestrator(recorded, &catalog, machines.clone()),
        orchestrator,
        // The Scheduler's calls fail as the store's requests do.
        schedules: pauses::schedules(&JOBS).with_faults(faults.clone()),
        store: MemoryStore::new(faults),
        queue: MemoryQueue::new(MAX_RECEIVES),
        registry: registry(&draw, &observed, &seen, clock, &trace),
        clock,
        draw,
        trace,
    };
    let outcomes = Arc::new(Mutex::new(BTreeMap::new()));
    let mut sent = messages(&world.draw);
    let mut workers: Vec<JoinHandle<()>> = (0..2 + world.draw.below(2))
        .map(|i| spawn_worker(format!("w{i}"), &world, &outcomes))
        .collect();
    // The messages arrive over the first half minute.
    let mut pending: Vec<(Duration, Sent)> = sent
        .iter()
        .map(|s| (world.draw.millis(0, 30_000), s.clone()))
        .collect();
    let burst = exclusive_burst(&world.draw);
    sent.extend(burst.iter().map(|(_, s)| s.clone()));
    pending.extend(burst);
    // The limited jobs' runs and the operator's cancels draw from draws of their own.
    let flow = Draw(Arc::new(Mutex::new(StdRng::seed_from_u64(seed ^ 0xf1_0e))));
    let limited = limited_runs(&flow);
    sent.extend(limited.iter().map(|(_, s)| s.clone()));
    pending.extend(limited);
    pending.sort_by_key(|(at, _)| *at);
    let operator = Draw(Arc::new(Mutex::new(StdRng::seed_from_u64(
        seed ^ 0xca_9ce1,
    ))));
    let mut cancelled = BTreeSet::new();
    // The operator's chain commands draw from a draw of their own too.
    // Two operators of the chains, each with a draw of its own, acting at once: a rerun
    // racing a cancel of the same run, a skip racing a rerun.
    let picked = Picked::default();
    let mut chain_operators: Vec<ChainOperator> = [0x000c_4a14_u64, 0x000c_4a15]
        .into_iter()
        .map(|salt| {
            ChainOperator::new(
                world.store.clone(),
                world.orchestrator.clone(),
                &catalog,
                machines.clone(),
                Draw(Arc::new(Mutex::new(StdRng::seed_from_u64(seed ^ salt)))),
                picked.clone(),
            )
        })
        .collect();
    let (mut kills, mut lives, mut redrives) = (0u32, 0usize, 0u32);
    let mut redriven = BTreeSet::new();
    let mut conductor = Conductor::new(world.orchestrator.clone(), catalog.chains.clone());
    let started = Instant::now();
    let mut ids: BTreeSet<String> = BTreeSet::new();
    let mut acts = Vec::new();
    loop {
        let step = world.draw.millis(200, 3_000);
        tokio::time::sleep(step).await;
        let now = started.elapsed();
        while pending.first().is_some_and(|(at, _)| *at <= now) {
            let (_, s) = pending.remove(0);
            let id = world.queue.send_body(&s.body);
            world.trace.say(format!("sent {id}: {:?}", s.what));
            ids.insert(id);
        }
        for s in conductor.turn() {
            let id = world.queue.send_body(&s.body);
            world
                .trace
                .say(format!("step functions sent {id}: {}", s.what));
            ids.insert(id);
        }
        // Faults of the queue and the workers, while the messages flow.
        if now < Duration::from_secs(120) {
            if world.draw.chance(0.15) {
                let i = world.draw.below(workers.len());
                workers[i].abort();
                lives += 1;
                kills += 1;
                world.trace.say(format!("w{i} killed"));
                workers[i] = spawn_worker(format!("w{i}.{lives}"), &world, &outcomes);
            }
            if world.draw.chance(0.1) && !ids.is_empty() {
                let id = ids.iter().nth(world.draw.below(ids.len())).cloned();
                if let Some(id) = id {
                    world.queue.expose(&id);
                    world.trace.say(format!("{id}: visibility cut short"));
                }
            }
            if world.draw.chance(0.05) && !ids.is_empty() {
                let id = ids.iter().nth(world.draw.below(ids.len())).cloned();
                if let Some(copy) = id.and_then(|id| world.queue.duplicate(&id)) {
                    world.trace.say(format!("{copy}: a duplicate delivery"));
                    ids.insert(copy);
                }
            }
            // An operator pauses or resumes a job (`jobs pause/resume`), the worker perhaps
            // pausing it at the same moment.
            if world.draw.chance(0.05) {
                let job = JOBS[world.draw.below(JOBS.len())];
                let resume = world.draw.chance(0.6);
                let act = pauses::operator_acts(
                    &world.schedules,
                    &world.store,
                    job,
                    resume,
                    world.clock.now(),
                )
                .await;
                world.trace.say(format!("operator: {act:?}"));
                acts.push(act);
            }
            // Now and then the operator cancels a running run: rarely, as operators do
            // (cancelling every few seconds, it ended each long `queued` run early, and
            // no waiter behind one looked again for long).
            if operator.chance(0.02) {
                let cancel =
                    cancel_a_running_run(&world.store, world.clock, &world.trace, &operator);
                cancelled.extend(cancel.await);
            }
            // An operator moves a dead letter back (`dlq redrive`): its run, if it FAILED,
            // runs a new round and ends with a new letter or DONE; a rejected message is
            // rejected again.
            let letters = world.queue.lock().dead_letters.len();
            if letters > 0 && world.draw.chance(0.1) {
                let index = world.draw.below(letters);
                let body = world.queue.lock().dead_letters[index].body.clone();
                redriven.insert(key_of(&body).unwrap_or(body));
                if let Some(id) = world.queue.redrive(index) {
                    world.trace.say(format!("{id}: a dead letter redriven"));
                    ids.insert(id);
                    redrives += 1;
                }
            }
        }
        // The operator reruns, skips and cancels chain runs (`chains rerun/skip/cancel`),
        // and takes an action that stopped half-way again, whenever that is.
        let acting = now < Duration::from_secs(120);
        let now_at = world.clock.now();
        *picked.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let [first, second] = chain_operators.as_mut_slice() else {
            unreachable!("two operators")
        };
        tokio::join!(
            first.turn(&world.store, now_at, acting, &world.trace),
            second.turn(&world.store, now_at, acting, &world.trace),
        );
        let drained = pending.is_empty()
            && world.queue.lock().messages.is_empty()
            && conductor.idle()
            && chain_operators.iter().all(ChainOperator::idle);
        if drained || now > GIVE_UP {
            break;
        }
    }
    let mut after_cancels = Vec::new();
    for op in &mut chain_operators {
        op.give_up();
        after_cancels.append(&mut op.left_running);
        after_cancels.extend(op.after_cancels());
    }
    let mut chain_acts = ChainActs::default();
    let (mut chain_cancelled, mut stuck) = (BTreeSet::new(), Vec::new());
    for op in chain_operators {
        chain_acts.reruns += op.acts.reruns;
        chain_acts.skips += op.acts.skips;
        chain_acts.cancels += op.acts.cancels;
        chain_cancelled.extend(op.cancelled);
        stuck.extend(op.stuck);
    }
    // Messages in hand are done once the queue is empty: every one was deleted.
    for w in &workers {
        w.abort();
    }
    let synced = pauses::final_sync(&world.schedules, &world.store, &JOBS, world.clock.now()).await;
    let states = JOBS
        .iter()
        .map(|j| (*j, world.schedules.state(j)))
        .collect();
    let store = world.store.snapshot();
    let kept = limits::probe_every_gate(&world.store.without_faults(), world.clock).await;
    let (dead_letters, left_in_queue) = {
        let q = world.queue.lock();
        (q.dead_letters.clone(), q.messages.len())
    };
    let trace = world.trace.lines.lock().unwrap().clone();
    let observed = std::mem::take(&mut *observed.lock().unwrap());
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let outcomes = outcomes.lock().unwrap().clone();
    Report {
        trace,
        sent,
        store,
        dead_letters,
        left_in_queue,
        observed,
        outcomes,
        kills,
        redrives,
        redriven,
        answers: world.orchestrator.lock().answers.clone(),
        tasks: conductor.tasks,
        pauses: PauseReport {
            acts,
            synced,
            states,
        },
        seen,
        kept,
        cancelled: cancelled.into_iter().chain(chain_cancelled).collect(),
        chain_acts,
        after_cancels,
        worker_actions: std::mem::take(&mut *worker_actions.lock().unwrap()),
        stuck,
    }
}

/// The operator cancels one RUNNING run of a job (`schedkit executions cancel KEY`; a
/// chain's run or step is refused there, so not drawn here), both worlds' operator; the
/// key it cancelled. The store may refuse it or lose its answer, as any request.
pub(super) async fn cancel_a_running_run(
    store: &MemoryStore,
    clock: Clock,
    trace: &Trace,
    operator: &Draw,
) -> Option<String> {
    let running: Vec<String> = store
        .snapshot()
        .records
        .into_iter()
        .filter(|(k, r)| r.status == Status::Running && !k.contains('#') && !is_internal(k))
        .map(|(k, _)| k)
        .collect();
    if running.is_empty() {
        return None;
    }
    let key = running[operator.below(running.len())].clone();
    let req = CancelRequest {
        key: key.clone(),
        by: "operator".into(),
        reason: "the simulation's operator".into(),
        now: clock.now(),
        only: vec![],
        arrived: None,
    };
    let answer = store.cancel(&req).await;
    trace.say(format!("operator cancels {key}: {}", answer.is_ok()));
    Some(key)
}

/// The key an envelope's text names, if any.
pub fn key_of(body: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()?
        .get("key")?
        .as_str()
        .map(str::to_string)
}

/// What all seeds reached, to show the faults and paths were exercised.
#[derive(Debug, Default)]
pub struct Totals {
    seeds: u64,
    kills: u64,
    redrives: u64,
    /// Jobs left paused by the worker, and by the operator.
    auto_paused: u64,
    operator_paused: u64,
    /// Runs the operator cancelled, and letters of runs that waited past their `max_wait`.
    cancelled: u64,
    limit_waits: u64,
    /// `chains rerun`, `chains skip` and `chains cancel` that completed.
    chain_reruns: u64,
    chain_skips: u64,
    chain_cancels: u64,
    outcomes: BTreeMap<String, u64>,
    /// The IAM actions of the workers' Step Functions calls, over every seed.
    worker_actions: BTreeSet<&'static str>,
}

impl Totals {
    pub fn add(&mut self, r: &Report) {
        self.seeds += 1;
        self.kills += u64::from(r.kills);
        self.redrives += u64::from(r.redrives);
        self.cancelled += r.cancelled.len() as u64;
        self.limit_waits += limits::limit_waits(&r.dead_letters) as u64;
        self.chain_reruns += u64::from(r.chain_acts.reruns);
        self.chain_skips += u64::from(r.chain_acts.skips);
        self.chain_cancels += u64::from(r.chain_acts.cancels);
        for p in r.store.pauses.values() {
            match p.by.as_str() {
                pauses::OPERATOR => self.operator_paused += 1,
                _ => self.auto_paused += 1,
            }
        }
        for (label, n) in &r.outcomes {
            *self.outcomes.entry(label.clone()).or_default() += n;
        }
        self.worker_actions.extend(&r.worker_actions);
    }

    /// Every Step Functions call a worker made is granted to the worker's role by the
    /// stage's template (LocalStack does not enforce IAM; AWS does).
    pub fn assert_granted(&self) {
        let ungranted = granted::ungranted(&self.worker_actions);
        assert!(
            ungranted.is_empty(),
            "the workers called {ungranted:?}, which infra/template.yaml's WorkerChainPolicy does not grant (the worker's role; src/iac/chain_resources.rs writes it)"
        );
    }

    /// Over enough seeds, every path the faults should reach was reached.
    pub fn assert_reached(&self) {
        if self.seeds < 200 {
            return;
        }
        assert!(self.kills > 0, "no worker was ever killed: {self}");
        assert!(
            self.redrives > 0,
            "no dead letter was ever redriven: {self}"
        );
        assert!(
            self.auto_paused > 0 && self.operator_paused > 0,
            "no job was ever left paused by the worker or by the operator: {self}"
        );
        assert!(self.cancelled > 0, "no run was ever cancelled: {self}");
        assert!(
            self.chain_reruns > 0 && self.chain_skips > 0 && self.chain_cancels > 0,
            "no chain run was ever rerun, skipped or cancelled by the operator: {self}"
        );
        assert!(
            self.limit_waits > 0,
            "no run ever waited past its max_wait: {self}"
        );
        // The calls a chain's worker makes: start a run, answer and keep alive its steps,
        // look at a cancelled run's execution. (It stops one only when it started it after
        // the cancel looked, a race 2,000 seeds may not draw; `worker_logic::cancel` drives
        // it.)
        for action in [
            "states:StartExecution",
            "states:SendTaskSuccess",
            "states:SendTaskFailure",
            "states:SendTaskHeartbeat",
            "states:DescribeExecution",
        ] {
            assert!(
                self.worker_actions.contains(action),
                "no worker called {action} in {} seeds: {:?}",
                self.seeds,
                self.worker_actions
            );
        }
        for label in [
            "succeeded",
            "duplicate",
            "in-progress",
            "retrying",
            "dead-lettered",
            "skipped",
            "waiting",
            "unavailable",
        ] {
            assert!(
                self.outcomes.get(label).is_some_and(|n| *n > 0),
                "no `{label}` outcome in {} seeds: {self}",
                self.seeds
            );
        }
    }
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} workers killed, {} dead letters redriven, {} jobs left paused by the worker and {} by the operator, {} runs cancelled, {} limit-wait letters, chain runs rerun {}, skipped {} and cancelled {} by the operator; outcomes {:?}",
            self.kills,
            self.redrives,
            self.auto_paused,
            self.operator_paused,
            self.cancelled,
            self.limit_waits,
            self.chain_reruns,
            self.chain_skips,
            self.chain_cancels,
            self.outcomes
        )
    }
}
