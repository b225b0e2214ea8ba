//! The simulation of flow control: runs of limited jobs (a keyed concurrency, a limit two
//! jobs share, a rate, a job with a short `max_wait`) through several workers that are
//! killed and restarted, over a store whose requests are slow, refused or lose their
//! answers, with duplicate deliveries and skewed clocks. A world of its own, so that the
//! main world's seeds still draw what they drew.
//!
//! An operator cancels some running runs (drawn from a draw of their own, so the seeds
//! still draw what they drew before): a cancelled attempt's body runs on until its next
//! heartbeat is refused, and counts as a body until it stops.
//!
//! A quarter of the runs are urgent (priority 5, sent to the urgent queue beside the jobs
//! queue, drawn from a draw of their own): their receipts go through parks, wakes, copies
//! sent again and kills as the others' do.
//!
//! A limit shared fairly by tenant (`fair`, two at once) takes a noisy tenant's burst and
//! a few quiet tenants' runs sent while it waits, some urgent ([`fair_runs`], a draw of its
//! own); the operator also cancels runs while they wait in a gate's line. So the line sees
//! woken runs that died (a killed worker), waiters cancelled, and permits given back twice
//! (a release applied, its answer lost, sent again).
//!
//! Its invariants: never more bodies of a gate at once than its limit (counting every body
//! still executing, cancelled ones included); no two starts of a
//! rate closer than its spacing (less the clocks' skew); every run decided (DONE, or FAILED
//! with its letter and reason: attempts exhausted, or `limit-wait`), so no waiter is
//! forgotten; once every run is decided no permit is kept: a new run takes each gate at
//! once, whatever the dead runs left behind; and every permit handed on from a line went to
//! the waiter whose turn it was, by priority risen with its wait and then by fair share
//! (`fair_line`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use schedkit::batch::MessageReport;
use schedkit::catalog::Catalog;
use schedkit::dead_letter::attr;
use schedkit::poller::{self, OnReport, PollOptions};
use schedkit::queue::{MemoryQueue, Outgoing};
use schedkit::store::{
    Change, ClaimOutcome, ClaimRequest, ExecutionStore, Faults, MemoryState, MemoryStore, Permit,
    PermitRequest,
};
use schedkit::{Clock, Ctx, Envelope, JobError, Jobs, Metrics, Processor, ProcessorConfig, Status};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::{Duration, Instant};

use super::world::{Draw, SeededFaults, Trace, cancel_a_running_run};

const CATALOG: &str = r#"
[limits.partner]
concurrency = 2
rate = "120/minute"

[limits.paced]
rate = "12/minute"

[jobs.tenant]
owner = "sim"
payload = { tenant = "a" }
lease_seconds = 20
heartbeat_seconds = 2
concurrency = { limit = 2, key = "{tenant}" }
retry = { max_attempts = 3, first_delay_seconds = 1, base_delay_seconds = 1, max_delay_seconds = 5 }

[jobs.partner-a]
owner = "sim"
lease_seconds = 3
limits = ["partner"]
retry = { max_attempts = 3, first_delay_seconds = 1, base_delay_seconds = 1, max_delay_seconds = 5 }

[jobs.partner-b]
owner = "sim"
lease_seconds = 3
limits = ["partner"]
concurrency = { limit = 1 }
retry = { max_attempts = 3, first_delay_seconds = 1, base_delay_seconds = 1, max_delay_seconds = 5 }

[jobs.paced]
owner = "sim"
lease_seconds = 3
limits = ["paced"]

[jobs.impatient]
owner = "sim"
lease_seconds = 3
concurrency = { limit = 1 }
max_wait_seconds = 20

[limits.fair]
concurrency = 2
fair = "{tenant}"

[jobs.fair]
owner = "sim"
lease_seconds = 20
heartbeat_seconds = 2
limits = ["fair"]
retry = { max_attempts = 3, first_delay_seconds = 1, base_delay_seconds = 1, max_delay_seconds = 5 }
"#;

/// The limited jobs (the composed world runs them too).
pub(super) const JOBS: [&str; 6] = [
    "tenant",
    "partner-a",
    "partner-b",
    "paced",
    "impatient",
    "fair",
];
/// The rate of `paced`: one start every five seconds.
pub(super) const PACED_SPACING: Duration = Duration::from_secs(5);
/// How far apart two workers' clocks may be (each is off by at most half of it).
pub(super) const SKEW: Duration = Duration::from_millis(400);
/// The workers' clock-skew bound.
pub(super) const BOUND: Duration = Duration::from_millis(500);
const GIVE_UP: Duration = Duration::from_secs(3 * 3600);

/// The groups a body of `job` with `tenant` counts in, with their limits.
fn groups(job: &str, tenant: &str) -> Vec<(String, u32)> {
    match job {
        "tenant" => vec![(format!("tenant/{tenant}"), 2)],
        "partner-a" => vec![("partner".into(), 2)],
        "partner-b" => vec![("partner".into(), 2), ("partner-b".into(), 1)],
        "impatient" => vec![("impatient".into(), 1)],
        "fair" => vec![("fair".into(), 2)],
        _ => Vec::new(),
    }
}

/// What the bodies saw.
#[derive(Debug, Default)]
pub struct Seen {
    now: BTreeMap<String, u32>,
    /// Bodies of a group at once, beyond its limit: each said in a line.
    pub over: Vec<String>,
    /// When each body of `paced` started, on the world's clock (ms).
    pub paced_starts: Vec<i64>,
}

/// Everything the invariants read.
#[derive(Debug)]
pub struct LimitReport {
    pub trace: Vec<String>,
    pub sent: Vec<String>,
    pub store: MemoryState,
    pub dead_letters: Vec<Outgoing>,
    pub left_in_queue: usize,
    pub seen: Seen,
    /// Gates a new run could not take once every run was decided.
    pub kept: Vec<String>,
    /// The runs the operator cancelled.
    pub cancelled: Vec<String>,
    /// Of those, the runs cancelled while they waited in a gate's line.
    pub cancelled_waiting: usize,
    /// What the line's invariants found.
    pub line: super::fair_line::LineCheck,
    /// Permits given back twice: a release applied, its answer lost, and sent again.
    pub returned_twice: usize,
}

/// The flow-control catalog (its limits and limited jobs).
pub(super) fn catalog() -> Catalog {
    Catalog::parse(CATALOG, "limits.toml").expect("the simulation's catalog")
}

fn registry(
    draw: &Draw,
    seen: &Arc<Mutex<Seen>>,
    clock: Clock,
    trace: &Trace,
) -> schedkit::Registry {
    let catalog = catalog();
    let mut jobs = Jobs::new();
    for job in JOBS {
        let (draw, seen, trace) = (draw.clone(), seen.clone(), trace.clone());
        jobs = jobs.add(job, move |ctx: Ctx| {
            run_body(job, ctx, draw.clone(), seen.clone(), clock, trace.clone())
        });
    }
    jobs.bind(&catalog).expect("every job implemented")
}

/// A limited job's body: counted in its groups while it runs (until it ends, or is dropped
/// when cancelled); now and then longer than its lease, now and then failing retryably.
pub(super) async fn run_body(
    job: &'static str,
    ctx: Ctx,
    draw: Draw,
    seen: Arc<Mutex<Seen>>,
    clock: Clock,
    trace: Trace,
) -> Result<serde_json::Value, JobError> {
    let tenant = ctx.payload["tenant"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let _body = Body::start(&seen, job, &tenant, clock, &ctx.key);
    trace.say(format!("{} attempt {} runs", ctx.key, ctx.attempt));
    let takes = match draw.chance(0.1) {
        // Longer than its lease: kept by heartbeats.
        true => draw.millis(4_000, 12_000),
        false => draw.millis(10, 2_500),
    };
    tokio::time::sleep(takes).await;
    match job != "paced" && draw.chance(0.15) {
        true => Err(JobError::retryable("not now")),
        false => Ok(json!(null)),
    }
}

/// Counts a body in its groups until dropped (ended or cancelled).
pub(super) struct Body {
    seen: Arc<Mutex<Seen>>,
    groups: Vec<(String, u32)>,
}

impl Body {
    fn start(seen: &Arc<Mutex<Seen>>, job: &str, tenant: &str, clock: Clock, key: &str) -> Body {
        let groups = groups(job, tenant);
        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
        for (group, limit) in &groups {
            let n = s.now.entry(group.clone()).or_default();
            *n += 1;
            if *n > *limit {
                let line = format!("{group}: {n} bodies at once (limit {limit}), {key} among them");
                s.over.push(line);
            }
        }
        if job == "paced" {
            s.paced_starts.push(clock.now().timestamp_millis());
        }
        Body {
            seen: seen.clone(),
            groups,
        }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        let mut s = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        for (group, _) in &self.groups {
            if let Some(n) = s.now.get_mut(group) {
                *n -= 1;
            }
        }
    }
}

struct World {
    draw: Draw,
    trace: Trace,
    store: MemoryStore,
    queue: MemoryQueue,
    registry: schedkit::Registry,
    clock: Clock,
}

fn spawn_worker(name: String, world: &World) -> JoinHandle<()> {
    let half = SKEW.as_millis() as i64 / 2;
    let skew = world.draw.lock().random_range(-half..=half);
    let config = ProcessorConfig {
        queue_url: "memory://jobs".into(),
        dlq_url: "memory://dlq".into(),
        concurrency: 4,
        worker_id: name.clone(),
        clock_skew: BOUND,
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
    let trace = world.trace.clone();
    let hear = move |report: &MessageReport| {
        let label = report.outcome.label();
        trace.say(format!("{name} {}: {label}", report.message_id));
    };
    let options = PollOptions {
        on_report: Some(OnReport(Arc::new(hear))),
        ..PollOptions::default()
    };
    tokio::spawn(async move {
        poller::poll(&processor, &options, std::future::pending()).await;
    })
}

/// One message to send: its run's key, its body, and whether it goes to the urgent queue.
type Run = (String, String, bool);

/// The runs of a seed: a handful of each job, some sent twice; a quarter urgent, drawn
/// from `lanes`.
fn runs(draw: &Draw, lanes: &Draw) -> Vec<Run> {
    let mut out = Vec::new();
    for i in 0..10 + draw.below(20) {
        let job = JOBS[draw.below(JOBS.len())];
        let key = format!("{job}-{i}");
        let mut e = Envelope::new(job, "2026-12-02T09:00:00Z".parse().unwrap());
        e.key = Some(key.clone());
        let tenant = ["a", "b"][draw.below(2)];
        e.payload = json!({"tenant": tenant}).as_object().cloned();
        let urgent = lanes.chance(0.25);
        if urgent {
            e.priority = Some(5);
        }
        let body = e.to_json();
        if draw.chance(0.2) {
            out.push((key.clone(), body.clone(), urgent));
        }
        out.push((key, body, urgent));
    }
    out
}

/// A noisy tenant's backlog and a few quiet tenants' runs of `fair` (a limit shared fairly
/// by tenant), each at its time, from a draw of their own (so the other runs draw what
/// they drew without them): tenant `a` sends a burst at once, `b` and `c` a run or two
/// while it waits; now and then one urgent.
fn fair_runs(fair: &Draw) -> Vec<(Duration, Run)> {
    let mut out = Vec::new();
    let burst = 6 + fair.below(10);
    let quiet = 2 + fair.below(4);
    for i in 0..burst + quiet {
        let (tenant, at) = match i < burst {
            true => ("a", fair.millis(0, 3_000)),
            false => (["b", "c"][fair.below(2)], fair.millis(1_000, 15_000)),
        };
        let key = format!("fair-{tenant}-{i}");
        let mut e = Envelope::new("fair", "2026-12-02T09:00:00Z".parse().unwrap());
        e.key = Some(key.clone());
        e.payload = json!({ "tenant": tenant }).as_object().cloned();
        let urgent = fair.chance(0.15);
        if urgent {
            e.priority = Some(5);
        }
        let run = (key, e.to_json(), urgent);
        if fair.chance(0.1) {
            out.push((at + fair.millis(0, 5_000), run.clone()));
        }
        out.push((at, run));
    }
    out
}

/// Runs the limits world of `seed` until its queue is drained.
pub async fn run(seed: u64) -> LimitReport {
    let draw = Draw(Arc::new(Mutex::new(StdRng::seed_from_u64(
        seed ^ 0x11_4175,
    ))));
    let trace = Trace {
        lines: Arc::default(),
        start: Instant::now(),
    };
    let faults: Arc<dyn Faults> = Arc::new(SeededFaults {
        draw: draw.clone(),
        trace: trace.clone(),
        verbose: std::env::var_os("SCHEDKIT_SIM_VERBOSE").is_some(),
        refused: if draw.chance(0.5) { 0.03 } else { 0.0 },
        lost: if draw.chance(0.5) { 0.03 } else { 0.0 },
        retried: if draw.chance(0.5) { 0.03 } else { 0.0 },
        slow: if draw.chance(0.3) { 0.05 } else { 0.005 },
        // The stale permit holder this world looks for comes from slow requests already
        // (limits seed 798); no stalls, so that its seeds draw as before.
        stalled: 0.0,
    });
    let seen = Arc::new(Mutex::new(Seen::default()));
    let clock = Clock::following_tokio("2026-12-02T09:00:00Z".parse().unwrap());
    let world = World {
        registry: registry(&draw, &seen, clock, &trace),
        store: MemoryStore::new(faults),
        queue: MemoryQueue::new(15).with_urgent(),
        clock,
        draw,
        trace,
    };
    let lanes = Draw(Arc::new(Mutex::new(StdRng::seed_from_u64(
        seed ^ 0x0b_9e47,
    ))));
    let mut sent = runs(&world.draw, &lanes);
    let mut pending: Vec<(Duration, String, bool)> = sent
        .iter()
        .map(|(_, body, urgent)| (world.draw.millis(0, 20_000), body.clone(), *urgent))
        .collect();
    let fair = Draw(Arc::new(Mutex::new(StdRng::seed_from_u64(seed ^ 0xfa_1e5))));
    for (at, run) in fair_runs(&fair) {
        pending.push((at, run.1.clone(), run.2));
        sent.push(run);
    }
    pending.sort_by_key(|(at, _, _)| *at);
    let mut workers: Vec<JoinHandle<()>> = (0..2 + world.draw.below(2))
        .map(|i| spawn_worker(format!("w{i}"), &world))
        .collect();
    let (started, mut lives) = (Instant::now(), 0usize);
    let mut ids = Vec::new();
    let operator = Draw(Arc::new(Mutex::new(StdRng::seed_from_u64(
        seed ^ 0xca_9ce1,
    ))));
    let (mut cancelled, mut cancelled_waiting) = (Vec::new(), 0);
    loop {
        tokio::time::sleep(world.draw.millis(200, 3_000)).await;
        let now = started.elapsed();
        while pending.first().is_some_and(|(at, _, _)| *at <= now) {
            let (_, body, urgent) = pending.remove(0);
            let queue = lane(&world.queue, urgent);
            ids.push((urgent, queue.send_body(&body)));
        }
        if now < Duration::from_secs(90) {
            if world.draw.chance(0.15) {
                let i = world.draw.below(workers.len());
                workers[i].abort();
                lives += 1;
                world.trace.say(format!("w{i} killed"));
                workers[i] = spawn_worker(format!("w{i}.{lives}"), &world);
            }
            if world.draw.chance(0.05) && !ids.is_empty() {
                let (urgent, id) = ids[world.draw.below(ids.len())].clone();
                if let Some(copy) = lane(&world.queue, urgent).duplicate(&id) {
                    world.trace.say(format!("{copy}: a duplicate delivery"));
                }
            }
        }
        if now < Duration::from_secs(90) && operator.chance(0.12) {
            let cancel = cancel_a_running_run(&world.store, world.clock, &world.trace, &operator);
            cancelled.extend(cancel.await);
        }
        if now < Duration::from_secs(90) && fair.chance(0.04) {
            let cancel = cancel_a_waiting_run(&world.store, world.clock, &world.trace, &fair);
            if let Some((key, done)) = cancel.await {
                cancelled_waiting += usize::from(done);
                cancelled.push(key);
            }
        }
        let drained = pending.is_empty() && held(&world.queue) == 0;
        if drained || now > GIVE_UP {
            break;
        }
    }
    for w in &workers {
        w.abort();
    }
    let kept = probe_every_gate(&world.store.without_faults(), world.clock).await;
    let store = world.store.snapshot();
    let mut dead_letters = world.queue.lock().dead_letters.clone();
    dead_letters.extend(lane(&world.queue, true).lock().dead_letters.clone());
    let left_in_queue = held(&world.queue);
    let trace = world.trace.lines.lock().unwrap().clone();
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let line = super::fair_line::check(&store.changes);
    let returned_twice = trace
        .iter()
        .filter(|l| l.contains("store release_permit") && l.contains(": Retried"))
        .count();
    LimitReport {
        trace,
        sent: sent.into_iter().map(|(k, _, _)| k).collect(),
        store,
        dead_letters,
        left_in_queue,
        seen,
        kept,
        cancelled,
        cancelled_waiting,
        line,
        returned_twice,
    }
}

/// The operator cancels a run that waits in a gate's line (its entry stays in the line
/// until a waker hands it a permit it will not take, or a taker drops it as gone): the
/// run's key, if one waited, and whether the cancel was answered (one whose answer was lost
/// may have been written).
async fn cancel_a_waiting_run(
    store: &MemoryStore,
    clock: Clock,
    trace: &Trace,
    operator: &Draw,
) -> Option<(String, bool)> {
    let state = store.snapshot();
    let waiting: Vec<String> = state
        .gates
        .values()
        .flat_map(|g| g.waiters.keys().cloned())
        .filter(|k| {
            state
                .records
                .get(k)
                .is_some_and(|r| schedkit::store::CANCELLABLE.contains(&r.status))
        })
        .collect();
    if waiting.is_empty() {
        return None;
    }
    let key = waiting[operator.below(waiting.len())].clone();
    let req = schedkit::store::CancelRequest {
        key: key.clone(),
        by: "operator".into(),
        reason: "the simulation's operator, while the run waits".into(),
        now: clock.now(),
        only: vec![],
        arrived: None,
    };
    let answer = store.cancel(&req).await;
    trace.say(format!(
        "operator cancels waiting {key}: {}",
        answer.is_ok()
    ));
    Some((key, answer.is_ok()))
}

/// The jobs queue, or the urgent queue beside it.
fn lane(queue: &MemoryQueue, urgent: bool) -> &MemoryQueue {
    match urgent {
        true => queue
            .urgent()
            .expect("the world's queue has an urgent queue"),
        false => queue,
    }
}

/// Messages the jobs queue and its urgent queue hold.
fn held(queue: &MemoryQueue) -> usize {
    queue.lock().messages.len() + lane(queue, true).lock().messages.len()
}

/// Once every run is decided, a new run claims and takes each gate that counts runs, one
/// lease and the skew bound later, and once an entry of a gate's line whose run no longer
/// waits (its message deleted while it was parked) is taken for gone: the gates it could
/// not take.
pub(super) async fn probe_every_gate(store: &MemoryStore, clock: Clock) -> Vec<String> {
    let line = schedkit::store::PARKED_FOR + schedkit::store::GONE_AFTER;
    tokio::time::sleep(Duration::from_secs(4).max(line + Duration::from_secs(1))).await;
    let now = clock.now();
    let gates: Vec<String> = store
        .snapshot()
        .gates
        .into_iter()
        .filter(|(_, g)| g.counted)
        .map(|(item, _)| item)
        .collect();
    let mut kept = Vec::new();
    for (i, item) in gates.iter().enumerate() {
        let key = format!("probe-{i}");
        let claim = ClaimRequest {
            key: key.clone(),
            job: "probe".into(),
            scheduled_for: "2026-12-02T09:00:00Z".into(),
            payload_hash: "h".into(),
            input: "{}".into(),
            message_id: None,
            owner: "probe:1".into(),
            now,
            lease: Duration::from_secs(3),
            retention: Duration::from_secs(3600),
            redrive: None,
        };
        let claimed = store.claim(&claim).await;
        assert!(matches!(claimed, Ok(ClaimOutcome::Claimed { .. })));
        let taken = store
            .take_permit(PermitRequest {
                share: "",
                priority: 0,
                since_ms: None,
                item,
                key: &key,
                owner: "probe:1",
                concurrency: Some(1),
                spacing: None,
                now,
                lease: Duration::from_secs(3),
                skew: BOUND,
            })
            .await;
        if !matches!(taken, Ok(Permit::Taken)) {
            kept.push(format!("{item}: {taken:?}"));
        }
    }
    kept
}

/// Every invariant `report` breaks, each said in a line.
pub fn check(report: &LimitReport) -> Vec<String> {
    let mut broken = Vec::new();
    if report.left_in_queue > 0 {
        broken.push(format!(
            "not drained: {} messages left",
            report.left_in_queue
        ));
    }
    flow(&report.seen, &report.store, &report.kept, &mut broken);
    for letter in &report.dead_letters {
        if !letter.attributes.contains_key(attr::REASON) {
            broken.push(format!("a dead letter without a reason: {}", letter.body));
        }
    }
    for key in &report.sent {
        let Some(record) = report.store.records.get(key) else {
            broken.push(format!("{key}: no record"));
            continue;
        };
        match record.status {
            Status::Done => {}
            Status::Failed => {
                let lettered = report.dead_letters.iter().any(|l| {
                    super::world::key_of(&l.body).as_deref() == Some(key.as_str())
                        && l.attributes
                            .get(attr::REASON)
                            .and_then(|r| r.string.as_deref())
                            .is_some_and(|r| {
                                ["attempts-exhausted", "permanent-error", "limit-wait"].contains(&r)
                            })
                });
                if !lettered {
                    let reasons: Vec<_> = report
                        .dead_letters
                        .iter()
                        .filter(|l| super::world::key_of(&l.body).as_deref() == Some(key.as_str()))
                        .map(|l| {
                            l.attributes
                                .get(attr::REASON)
                                .and_then(|r| r.string.clone())
                        })
                        .collect();
                    broken.push(format!(
                        "{key}: FAILED without its letter (letters: {reasons:?})"
                    ));
                }
            }
            Status::Cancelled if report.cancelled.contains(key) => {}
            other => broken.push(format!("{key}: left {other}")),
        }
    }
    broken
}

/// The flow-control invariants (this world's and the composed one's): never more bodies of
/// a gate at once than its limit, counting every body still executing (cancelled ones
/// included); no permit past its limit in the store; no two starts of `paced` closer than
/// its spacing (less the clocks' skew, and the skew bound a late answer may add); and no
/// permit kept once every run is decided.
pub(super) fn flow(seen: &Seen, store: &MemoryState, kept: &[String], broken: &mut Vec<String>) {
    broken.extend(seen.over.iter().cloned());
    // Every gate as the store's stream shows it after each write: never more holders than
    // the limit it was entered under.
    for change in &store.changes {
        if let Change::Gate {
            item,
            after,
            limit: Some(limit),
        } = change
            && after.holders.len() > *limit as usize
        {
            broken.push(format!(
                "{item}: {} holders under a limit of {limit}",
                after.holders.len()
            ));
        }
    }
    broken.extend(
        kept.iter()
            .map(|k| format!("a permit kept after every run ended: {k}")),
    );
    broken.extend(super::fair_line::check(&store.changes).broken);
    let least = PACED_SPACING.saturating_sub(SKEW + BOUND).as_millis() as i64;
    for pair in seen.paced_starts.windows(2) {
        if pair[1] - pair[0] < least {
            broken.push(format!(
                "paced: two starts {} ms apart (spacing {} ms)",
                pair[1] - pair[0],
                PACED_SPACING.as_millis()
            ));
        }
    }
}

/// How many of `letters` are runs that waited past their `max_wait` (`limit-wait`).
pub(super) fn limit_waits(letters: &[Outgoing]) -> usize {
    letters
        .iter()
        .filter(|l| {
            l.attributes
                .get(attr::REASON)
                .and_then(|r| r.string.as_deref())
                == Some("limit-wait")
        })
        .count()
}
