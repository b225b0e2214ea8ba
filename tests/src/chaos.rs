//! Chaos: deliveries through several worker processes (the real binary, polling mode) that
//! are SIGKILLed at random and restarted, with duplicate deliveries, transient failures,
//! poison messages, key conflicts and a DynamoDB outage; then exact accounting of where
//! every message went. The CI test runs it small (`tests/tests/chaos.rs`); the `chaos`
//! binary runs it at any size and prints the report.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use schedkit::Envelope;
use schedkit::dead_letter::attr;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::proxy::TcpProxy;
use crate::stack::Stack;

/// What to throw at the workers.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Messages sent in all (duplicates, poison and conflicts included).
    pub deliveries: usize,
    /// Worker processes polling at once.
    pub pollers: usize,
    /// Share of deliveries that repeat an earlier invoice (same key, same payload).
    pub duplicate_share: f64,
    /// Share that are `flaky-sync` runs failing once before they succeed.
    pub transient_share: f64,
    /// Share that are not envelopes at all.
    pub poison_share: f64,
    /// Share that reuse an invoice's key with another amount (one of each pair is refused).
    pub conflict_share: f64,
    /// Kills go on at least this long, and until every message was received once.
    pub kill_for: Duration,
    /// A kill every this much, at random between the two.
    pub kill_every: (Duration, Duration),
    /// DynamoDB unreachable for the workers from this far into the run, this long.
    pub outage: Option<(Duration, Duration)>,
    /// Seed of every random choice (the workload and the kills).
    pub seed: u64,
}

impl Plan {
    /// The plan the issue asks of CI, at `deliveries`.
    pub fn standard(deliveries: usize) -> Plan {
        Plan {
            deliveries,
            pollers: 3,
            duplicate_share: 0.25,
            transient_share: 0.03,
            poison_share: 0.01,
            conflict_share: 0.005,
            kill_for: Duration::from_secs(60),
            kill_every: (Duration::from_secs(1), Duration::from_secs(2)),
            outage: Some((Duration::from_secs(20), Duration::from_secs(4))),
            seed: 11,
        }
    }
}

/// Where everything went.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub sent: usize,
    pub invoices: usize,
    pub duplicates: usize,
    pub transient: usize,
    pub poison: usize,
    pub conflicts: usize,
    pub kills: usize,
    /// Runs (distinct keys) DONE.
    pub done: usize,
    /// Messages dead-lettered, by reason (distinct source messages).
    pub dead_letters: BTreeMap<String, usize>,
    /// Extra copies of a dead letter: a worker killed after sending a letter and before
    /// deleting its message sends it again when the message comes back (at least once).
    pub dead_letter_copies: usize,
    /// Runs that should be DONE and are not.
    pub lost: Vec<String>,
    /// Invoices whose effect was applied more than once (`applied > 1`).
    pub doubled: Vec<String>,
    /// Invoices DONE whose effect is missing.
    pub missing_effect: Vec<String>,
    /// Transitions the workers logged as UNAVAILABLE (the outage seen from inside).
    pub unavailable_logged: u64,
    /// From the last kill to a queue with nothing visible, in flight or delayed.
    pub drained_after_last_kill: Duration,
    /// What that may take: the longest lease (a killed worker's messages come back after
    /// it) plus a margin for one in-progress bounce and a retry's backoff.
    pub recovery_bound: Duration,
    pub wall: Duration,
}

impl Report {
    /// Every way the run fell short; empty when it held.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.lost.is_empty() {
            out.push(format!(
                "{} runs lost: {:?}",
                self.lost.len(),
                first(&self.lost)
            ));
        }
        if !self.doubled.is_empty() {
            out.push(format!(
                "{} effects applied twice: {:?}",
                self.doubled.len(),
                first(&self.doubled)
            ));
        }
        if !self.missing_effect.is_empty() {
            out.push(format!(
                "{} DONE without their effect: {:?}",
                self.missing_effect.len(),
                first(&self.missing_effect)
            ));
        }
        let letters = |r: &str| self.dead_letters.get(r).copied().unwrap_or(0);
        if letters("poison") != self.poison {
            out.push(format!(
                "{} poison letters for {} poison messages",
                letters("poison"),
                self.poison
            ));
        }
        if letters("key-conflict") != self.conflicts {
            out.push(format!(
                "{} key-conflict letters for {} conflicts",
                letters("key-conflict"),
                self.conflicts
            ));
        }
        let other: usize =
            self.dead_letters.values().sum::<usize>() - letters("poison") - letters("key-conflict");
        if other != 0 {
            out.push(format!(
                "{other} unexpected dead letters: {:?}",
                self.dead_letters
            ));
        }
        let distinct = self.invoices + self.transient + self.poison + self.conflicts;
        let accounted = self.done + self.dead_letters.values().sum::<usize>();
        if accounted != distinct {
            out.push(format!(
                "done + dead-lettered = {accounted}, distinct messages = {distinct}"
            ));
        }
        if self.drained_after_last_kill > self.recovery_bound {
            out.push(format!(
                "drained {:.1} s after the last kill; the bound is {:.1} s",
                self.drained_after_last_kill.as_secs_f64(),
                self.recovery_bound.as_secs_f64()
            ));
        }
        out
    }
}

fn first(v: &[String]) -> &[String] {
    &v[..v.len().min(5)]
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let letters = |r: &str| self.dead_letters.get(r).copied().unwrap_or(0);
        writeln!(f, "| chaos run | value |")?;
        writeln!(f, "| --- | ---: |")?;
        let rows: [(&str, String); 17] = [
            ("deliveries sent", self.sent.to_string()),
            ("distinct invoices", self.invoices.to_string()),
            ("duplicate deliveries", self.duplicates.to_string()),
            (
                "transient failures (flaky-sync, fail once)",
                self.transient.to_string(),
            ),
            ("poison messages", self.poison.to_string()),
            ("key conflicts", self.conflicts.to_string()),
            ("pollers SIGKILLed and restarted", self.kills.to_string()),
            (
                "UNAVAILABLE transitions logged (DynamoDB outage)",
                self.unavailable_logged.to_string(),
            ),
            ("runs DONE", self.done.to_string()),
            (
                "dead letters: poison / key-conflict",
                format!("{} / {}", letters("poison"), letters("key-conflict")),
            ),
            (
                "extra copies of a dead letter (killed between send and delete)",
                self.dead_letter_copies.to_string(),
            ),
            ("lost", self.lost.len().to_string()),
            ("effects applied twice", self.doubled.len().to_string()),
            ("DONE without effect", self.missing_effect.len().to_string()),
            (
                "drained after the last kill (s)",
                format!("{:.1}", self.drained_after_last_kill.as_secs_f64()),
            ),
            (
                "recovery bound: longest lease + margin (s)",
                format!("{:.0}", self.recovery_bound.as_secs_f64()),
            ),
            ("wall time (s)", format!("{:.0}", self.wall.as_secs_f64())),
        ];
        for (name, value) in rows {
            writeln!(f, "| {name} | {value} |")?;
        }
        Ok(())
    }
}

/// The messages of a plan, shuffled, and what they are.
struct Workload {
    bodies: Vec<String>,
    /// Invoice keys that must end DONE with `applied = 1`.
    invoice_keys: Vec<String>,
    /// Other keys that must end DONE.
    other_keys: Vec<String>,
    report: Report,
}

fn invoice(tenant: usize, amount: usize) -> Envelope {
    let mut e = Envelope::new("record-invoice", "2026-11-01T02:00:00Z".parse().unwrap());
    e.payload =
        json!({"tenant": format!("c{tenant}"), "billing_month": "2026-10", "amount_cents": amount})
            .as_object()
            .cloned();
    e
}

fn workload(plan: &Plan, rng: &mut StdRng) -> Workload {
    let n = plan.deliveries;
    let share = |s: f64| (n as f64 * s).round() as usize;
    let (duplicates, transient, poison, conflicts) = (
        share(plan.duplicate_share),
        share(plan.transient_share),
        share(plan.poison_share),
        share(plan.conflict_share),
    );
    let invoices = n - duplicates - transient - poison - conflicts;
    assert!(invoices > conflicts, "too few invoices for the conflicts");
    let mut bodies = Vec::with_capacity(n);
    for i in 0..invoices {
        bodies.push(invoice(i, 100 + i).to_json());
    }
    // Conflicts reuse the first invoices' keys, which are never duplicated: whichever of a
    // pair is claimed first runs, the other is refused, one letter per pair.
    for i in 0..conflicts {
        bodies.push(invoice(i, 1).to_json());
    }
    for _ in 0..duplicates {
        let i = rng.random_range(conflicts..invoices);
        bodies.push(invoice(i, 100 + i).to_json());
    }
    let base: chrono::DateTime<chrono::Utc> = "2026-11-01T00:00:00Z".parse().unwrap();
    let mut other_keys = Vec::new();
    for k in 0..transient {
        let at = base + chrono::Duration::minutes(k as i64);
        let mut e = Envelope::new("flaky-sync", at);
        e.payload = json!({"fail_times": 1}).as_object().cloned();
        other_keys.push(schedkit::key::execution_key(&e, None).unwrap());
        bodies.push(e.to_json());
    }
    for k in 0..poison {
        bodies.push(format!("chaos poison {k}: not an envelope"));
    }
    bodies.shuffle(rng);
    Workload {
        invoice_keys: (0..invoices)
            .map(|i| format!("invoice:2026-10:c{i}"))
            .collect(),
        other_keys,
        bodies,
        report: Report {
            sent: n,
            invoices,
            duplicates,
            transient,
            poison,
            conflicts,
            ..Report::default()
        },
    }
}

/// One worker process and the count of UNAVAILABLE lines it logged.
fn spawn_poller(
    stack: &Stack,
    dynamodb: &str,
    unavailable: Arc<AtomicU64>,
    id: usize,
    life: usize,
) -> Child {
    let mut child = Command::new(crate::binary("worker"))
        .args(["--wait-seconds", "1"])
        .envs(stack.worker_env())
        .env("AWS_ENDPOINT_URL_DYNAMODB", dynamodb)
        .env("SCHEDKIT_WORKER_ID", format!("chaos-{id}-{life}"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker binary starts (cargo build --bins)");
    let stdout = child.stdout.take().expect("piped");
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("\"status\":\"UNAVAILABLE\"") {
                unavailable.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    child
}

/// Runs `plan` against `stack` (a stage of the example worker's template).
pub async fn run(stack: &Stack, plan: &Plan) -> anyhow::Result<Report> {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(plan.seed);
    let Workload {
        bodies,
        invoice_keys,
        other_keys,
        mut report,
    } = workload(plan, &mut rng);
    // A tenth of the messages wait for the outage, so the workers have work that needs
    // DynamoDB while it is unreachable however fast they drained the rest.
    let held_back = if plan.outage.is_some() {
        bodies.len() / 10
    } else {
        0
    };
    let (now, at_outage) = bodies.split_at(bodies.len() - held_back);
    stack.send_all(now.iter().map(String::as_str)).await?;

    let proxy = TcpProxy::start(crate::endpoint().trim_start_matches("http://")).await?;
    let unavailable = Arc::new(AtomicU64::new(0));
    let mut lives = vec![0usize; plan.pollers];
    let mut pollers: Vec<Child> = (0..plan.pollers)
        .map(|i| spawn_poller(stack, &proxy.url(), unavailable.clone(), i, 0))
        .collect();

    let chaos_started = Instant::now();
    let mut outage_over = plan.outage.is_none();
    let mut outage_began: Option<Instant> = None;
    let last_kill = loop {
        let (lo, hi) = plan.kill_every;
        tokio::time::sleep(rng.random_range(lo..=hi)).await;
        let i = rng.random_range(0..plan.pollers);
        pollers[i].start_kill()?;
        pollers[i].wait().await?;
        lives[i] += 1;
        pollers[i] = spawn_poller(stack, &proxy.url(), unavailable.clone(), i, lives[i]);
        report.kills += 1;
        let killed_at = Instant::now();
        // The outage begins at the first kill `at` into the run and ends at the first kill
        // `len` after it began.
        if let Some((at, len)) = plan.outage {
            match outage_began {
                None if chaos_started.elapsed() >= at => {
                    outage_began = Some(Instant::now());
                    proxy.cut();
                    stack.send_all(at_outage.iter().map(String::as_str)).await?;
                }
                Some(began) if !outage_over && began.elapsed() >= len => {
                    proxy.heal();
                    outage_over = true;
                }
                _ => {}
            }
        }
        let (visible, _, _) = stack.counts(&stack.queue_url).await?;
        if chaos_started.elapsed() >= plan.kill_for && visible == 0 && outage_over {
            break killed_at;
        }
    };

    report.recovery_bound = stack_longest_lease() + Duration::from_secs(20);
    let give_up = last_kill + report.recovery_bound + Duration::from_secs(120);
    loop {
        let (visible, in_flight, delayed) = stack.counts(&stack.queue_url).await?;
        if visible + in_flight + delayed == 0 {
            break;
        }
        anyhow::ensure!(
            Instant::now() < give_up,
            "not drained: {visible} visible, {in_flight} in flight, {delayed} delayed"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    report.drained_after_last_kill = last_kill.elapsed();
    for p in &mut pollers {
        p.start_kill()?;
        p.wait().await?;
    }
    report.unavailable_logged = unavailable.load(Ordering::Relaxed);

    // Accounting.
    let records: HashMap<String, schedkit::ExecutionRecord> = stack
        .records()
        .await?
        .into_iter()
        .map(|r| (r.execution_key.clone(), r))
        .collect();
    let done = |k: &str| {
        records
            .get(k)
            .is_some_and(|r| r.status == schedkit::Status::Done)
    };
    report.done = records
        .values()
        .filter(|r| r.status == schedkit::Status::Done)
        .count();
    report.lost = invoice_keys
        .iter()
        .chain(&other_keys)
        .filter(|k| !done(k))
        .cloned()
        .collect();
    let applied = effects_applied(stack).await?;
    for key in &invoice_keys {
        match applied.get(key).copied().unwrap_or(0) {
            0 if done(key) => report.missing_effect.push(key.clone()),
            n if n > 1 => report.doubled.push(key.clone()),
            _ => {}
        }
    }
    let mut sources = std::collections::HashSet::new();
    for letter in stack.drain_dlq(Duration::from_secs(5)).await? {
        let text = |name: &str| {
            letter
                .message_attributes
                .as_ref()
                .and_then(|a| a.get(name))
                .and_then(|v| v.string_value.clone())
        };
        let source = text(attr::SOURCE_MESSAGE_ID).or(letter.message_id.clone());
        if !sources.insert(source) {
            report.dead_letter_copies += 1;
            continue;
        }
        let reason = text(attr::REASON).unwrap_or_else(|| "redrive-policy".into());
        *report.dead_letters.entry(reason).or_default() += 1;
    }
    report.wall = started.elapsed();
    Ok(report)
}

/// The example catalog's longest lease: how long a received message stays hidden.
fn stack_longest_lease() -> Duration {
    let catalog = schedkit_worker::CATALOG
        .load()
        .expect("the shipped catalog is valid");
    catalog
        .jobs
        .values()
        .map(|j| j.policy.lease)
        .max()
        .unwrap_or_default()
}

/// `applied` of every item of the effects table.
async fn effects_applied(stack: &Stack) -> anyhow::Result<HashMap<String, i64>> {
    let items = stack.scan(&stack.effects_table).await?;
    Ok(items
        .iter()
        .filter_map(|item| {
            let key = item.get("effect_key")?.as_s().ok()?.clone();
            let applied = item
                .get("applied")
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            Some((key, applied))
        })
        .collect())
}
