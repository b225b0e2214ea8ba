//! The simulated world of one seed: its catalog, its messages, its workers and the faults
//! that befall them, all drawn from the seed; what happened, for the invariants.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use aws_sdk_dynamodb::types::{AttributeValue, Put};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use schedkit::queue::{JobQueue, MemoryQueue, Outgoing};
use schedkit::store::{Fault, Faults, MemoryState, MemoryStore};
use schedkit::{
    Clock, Envelope, JobContext, JobError, JobPolicy, Metrics, Overlap, Processor, ProcessorConfig,
    Registry, RetryPolicy,
};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::{Duration, Instant};

/// An effect committed with the outcome.
pub const INVOICE: &str = "invoice";
/// Fails retryably at random; three attempts.
pub const FLAKY: &str = "flaky";
/// Fails for good.
pub const BROKEN: &str = "broken";
/// Runs past its lease, kept by heartbeats.
pub const SLOW: &str = "slow";
/// `overlap = "skip"`.
pub const EXCLUSIVE: &str = "exclusive";
/// `overlap = "buffer_one"`.
pub const QUEUED: &str = "queued";
const JOBS: [&str; 6] = [INVOICE, FLAKY, BROKEN, SLOW, EXCLUSIVE, QUEUED];

/// The redrive policy's receives (the template's attempts + 10).
const MAX_RECEIVES: u32 = 15;
/// Visibility at receive: the longest lease, as the poller asks.
const VISIBILITY: Duration = Duration::from_secs(10);
/// How long the world may run before it counts as not drained.
const GIVE_UP: Duration = Duration::from_secs(3 * 3600);

/// One random source for the whole world.
#[derive(Debug, Clone)]
struct Draw(Arc<Mutex<StdRng>>);

impl Draw {
    fn lock(&self) -> MutexGuard<'_, StdRng> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn chance(&self, p: f64) -> bool {
        self.lock().random_bool(p)
    }
    fn millis(&self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.lock().random_range(lo..hi))
    }
    fn below(&self, n: usize) -> usize {
        self.lock().random_range(0..n)
    }
}

/// What happened, in order, with the simulated time.
#[derive(Debug, Clone)]
pub struct Trace {
    lines: Arc<Mutex<Vec<String>>>,
    start: Instant,
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
struct SeededFaults {
    draw: Draw,
    trace: Trace,
    /// Every request in the trace, not only the faulty ones (`SCHEDKIT_SIM_VERBOSE`).
    verbose: bool,
    refused: f64,
    lost: f64,
}

impl Faults for SeededFaults {
    fn request(&self, request: &'static str, key: &str) -> (Duration, Fault) {
        let mut delay = self.draw.millis(1, 30);
        if self.draw.chance(0.005) {
            delay = self.draw.millis(1_000, 4_000);
        }
        let fault = if self.draw.chance(self.refused) {
            Fault::Unavailable
        } else if self.draw.chance(self.lost) {
            Fault::LoseAnswer
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
        *o.runs.entry(key.to_string()).or_default() += 1;
        Running {
            observed: observed.clone(),
            job,
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

/// The catalog: each job's body and policy.
fn registry(draw: &Draw, observed: &Arc<Mutex<Observed>>, trace: &Trace) -> Registry {
    let mut registry = Registry::new();
    for job in JOBS {
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
        let policy = JobPolicy {
            retry: RetryPolicy {
                max_attempts: 3,
                ..RetryPolicy::default()
            },
            timeout: Some(Duration::from_secs(60)),
            ..policy
        };
        let (draw, observed, trace) = (draw.clone(), observed.clone(), trace.clone());
        registry = registry.register(job, policy, move |ctx: JobContext| {
            let (draw, observed, trace) = (draw.clone(), observed.clone(), trace.clone());
            async move {
                let _running = Running::start(&observed, job, &ctx.key);
                trace.say(format!("{} attempt {} runs", ctx.key, ctx.attempt));
                let takes = match job {
                    SLOW => draw.millis(3_000, 9_000),
                    _ => draw.millis(10, 2_500),
                };
                tokio::time::sleep(takes).await;
                match job {
                    INVOICE => {
                        let put = Put::builder()
                            .table_name("effects")
                            .item("effect_key", AttributeValue::S(ctx.key.clone()))
                            .build()
                            .expect("table and item set");
                        ctx.effects().put(put);
                        Ok(json!({"applied": ctx.key}))
                    }
                    FLAKY if draw.chance(0.5) => Err(JobError::retryable("flaky")),
                    BROKEN => Err(JobError::permanent("broken for good")),
                    _ => Ok(json!(null)),
                }
            }
        });
    }
    registry
}

/// One message the world sends.
#[derive(Debug, Clone)]
pub struct Sent {
    /// The run's key (None: poison).
    pub key: Option<String>,
    /// The same key with another payload: refused as a key conflict.
    pub conflict: bool,
    pub body: String,
}

/// The messages of a seed: runs of every job, duplicates, a conflict, poison.
fn messages(draw: &Draw) -> Vec<Sent> {
    let runs = 6 + draw.below(10);
    let mut out = Vec::new();
    for i in 0..runs {
        let job = JOBS[draw.below(JOBS.len())];
        let key = format!("{job}-{i}");
        let mut e = Envelope::new(job, "2026-12-02T09:00:00Z".parse().unwrap());
        e.key = Some(key.clone());
        e.payload = json!({"n": i}).as_object().cloned();
        let sent = Sent {
            key: Some(key.clone()),
            conflict: false,
            body: e.to_json(),
        };
        if draw.chance(0.3) {
            out.push(sent.clone());
        }
        if draw.chance(0.08) {
            e.payload = json!({"n": i, "other": true}).as_object().cloned();
            out.push(Sent {
                conflict: true,
                body: e.to_json(),
                ..sent.clone()
            });
        }
        out.push(sent);
    }
    if draw.chance(0.2) {
        out.push(Sent {
            key: None,
            conflict: false,
            body: "poison: not an envelope".into(),
        });
    }
    out
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
}

/// A worker: a processor and its receive loop, on its own clock.
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
        auto_pause: None,
        chains: None,
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
    let (queue, trace, outcomes) = (world.queue.clone(), world.trace.clone(), outcomes.clone());
    tokio::spawn(async move {
        loop {
            let messages = queue.receive(4, VISIBILITY);
            if messages.is_empty() {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            let ids: Vec<_> = messages.iter().map(|m| m.message_id.clone()).collect();
            trace.say(format!("{name} received {ids:?}"));
            for report in processor.process(messages, None).await {
                let label = report.outcome.label();
                trace.say(format!("{name} {}: {label}", report.message_id));
                *outcomes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(label.to_string())
                    .or_default() += 1;
                if report.outcome.acknowledged()
                    && !report.outcome.deleted()
                    && let Some(receipt) = &report.receipt_handle
                {
                    let _ = queue.delete(receipt).await;
                }
            }
        }
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
}

/// Runs the world of `seed` until its queue is drained (or [`GIVE_UP`]).
pub async fn run(seed: u64) -> Report {
    let draw = Draw(Arc::new(Mutex::new(StdRng::seed_from_u64(seed))));
    let trace = Trace {
        lines: Arc::default(),
        start: Instant::now(),
    };
    let observed = Arc::new(Mutex::new(Observed::default()));
    let faults = SeededFaults {
        draw: draw.clone(),
        trace: trace.clone(),
        verbose: std::env::var_os("SCHEDKIT_SIM_VERBOSE").is_some(),
        refused: if draw.chance(0.5) { 0.03 } else { 0.0 },
        lost: if draw.chance(0.5) { 0.03 } else { 0.0 },
    };
    let world = World {
        store: MemoryStore::new(Arc::new(faults)),
        queue: MemoryQueue::new(MAX_RECEIVES),
        registry: registry(&draw, &observed, &trace),
        clock: Clock::following_tokio("2026-12-02T09:00:00Z".parse().unwrap()),
        draw,
        trace,
    };
    let outcomes = Arc::new(Mutex::new(BTreeMap::new()));
    let sent = messages(&world.draw);
    let mut workers: Vec<JoinHandle<()>> = (0..2 + world.draw.below(2))
        .map(|i| spawn_worker(format!("w{i}"), &world, &outcomes))
        .collect();
    // The messages arrive over the first half minute.
    let mut pending: Vec<(Duration, Sent)> = sent
        .iter()
        .map(|s| (world.draw.millis(0, 30_000), s.clone()))
        .collect();
    pending.sort_by_key(|(at, _)| *at);
    let (mut kills, mut lives, mut redrives) = (0u32, 0usize, 0u32);
    let started = Instant::now();
    let mut ids: BTreeSet<String> = BTreeSet::new();
    loop {
        let step = world.draw.millis(200, 3_000);
        tokio::time::sleep(step).await;
        let now = started.elapsed();
        while pending.first().is_some_and(|(at, _)| *at <= now) {
            let (_, s) = pending.remove(0);
            let id = world.queue.send_body(&s.body);
            world.trace.say(format!(
                "sent {id}: {}",
                s.key.as_deref().unwrap_or("poison")
            ));
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
            // An operator moves a dead letter back (`dlq redrive`): its run, if it FAILED,
            // runs a new round and ends with a new letter or DONE; a rejected message is
            // rejected again.
            let letters = world.queue.lock().dead_letters.len();
            if letters > 0 && world.draw.chance(0.1) {
                let index = world.draw.below(letters);
                if let Some(id) = world.queue.redrive(index) {
                    world.trace.say(format!("{id}: a dead letter redriven"));
                    ids.insert(id);
                    redrives += 1;
                }
            }
        }
        let drained = pending.is_empty() && world.queue.lock().messages.is_empty();
        if drained || now > GIVE_UP {
            break;
        }
    }
    // Messages in hand are done once the queue is empty: every one was deleted.
    for w in &workers {
        w.abort();
    }
    let store = world.store.snapshot();
    let (dead_letters, left_in_queue) = {
        let q = world.queue.lock();
        (q.dead_letters.clone(), q.messages.len())
    };
    let trace = world.trace.lines.lock().unwrap().clone();
    let observed = std::mem::take(&mut *observed.lock().unwrap());
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
    }
}

/// What all seeds reached, to show the faults and paths were exercised.
#[derive(Debug, Default)]
pub struct Totals {
    seeds: u64,
    kills: u64,
    redrives: u64,
    outcomes: BTreeMap<String, u64>,
}

impl Totals {
    pub fn add(&mut self, r: &Report) {
        self.seeds += 1;
        self.kills += u64::from(r.kills);
        self.redrives += u64::from(r.redrives);
        for (label, n) in &r.outcomes {
            *self.outcomes.entry(label.clone()).or_default() += n;
        }
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
            "{} workers killed, {} dead letters redriven; outcomes {:?}",
            self.kills, self.redrives, self.outcomes
        )
    }
}
