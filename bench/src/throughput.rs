//! N deliveries through each side's polling worker: the same shuffled envelopes
//! (`record-invoice`, a share delivered twice), the same effect write, batches of 10, each
//! side a process polling the jobs queue until it is drained, the sides alternating. Per
//! run: wall time, CPU time and peak RSS of the process (from `wait4`), the AWS requests it
//! made (counted on the wire, [`crate::wire`]), and the size of the items it left in each
//! table (for the write units a request costs, [`crate::cost`]). A run counts only when
//! every invoice's effect was applied exactly once.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType,
};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use schedkit::Envelope;
use schedkit_testkit::Stack;
use serde_json::json;

use crate::sides::{Programs, Side};
use crate::wire::{Counts, WireCounter};

/// One run of one side.
#[derive(Debug, Clone)]
pub struct Run {
    pub wall: Duration,
    pub cpu: Duration,
    pub peak_rss_kb: i64,
    pub counts: Counts,
    /// Mean item size in bytes (DynamoDB's rules) of each table the run wrote.
    pub item_bytes: BTreeMap<String, f64>,
}

/// Every run of both sides.
#[derive(Debug, Clone, Default)]
pub struct Throughput {
    pub deliveries: usize,
    pub invoices: usize,
    pub runs: BTreeMap<Side, Vec<Run>>,
}

impl Throughput {
    pub fn of(&self, side: Side, f: impl Fn(&Run) -> f64) -> Vec<f64> {
        self.runs
            .get(&side)
            .map(|runs| runs.iter().map(f).collect())
            .unwrap_or_default()
    }
}

/// An invoice's envelope; `render_seconds` is how long the job awaits before its write.
pub fn invoice(tenant: usize, render_seconds: f64) -> String {
    let at = "2026-11-01T02:00:00Z".parse().expect("an instant");
    let mut e = Envelope::new("record-invoice", at);
    let mut payload = json!({
        "tenant": format!("t{tenant:05}"),
        "billing_month": "2026-10",
        "amount_cents": 1000 + tenant,
    });
    if render_seconds > 0.0 {
        payload["render_seconds"] = json!(render_seconds);
    }
    e.payload = payload.as_object().cloned();
    e.to_json()
}

/// The workload: `n` envelopes, `share` of them repeating an earlier invoice, shuffled.
pub fn workload(n: usize, share: f64, seed: u64) -> (Vec<String>, usize) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let unique = (n - (n as f64 * share).round() as usize).max(1);
    let invoices: Vec<String> = (0..unique).map(|t| invoice(t, 0.0)).collect();
    let mut bodies = invoices.clone();
    while bodies.len() < n {
        bodies.push(invoices[rng.random_range(0..unique)].clone());
    }
    bodies.shuffle(&mut rng);
    (bodies, unique)
}

/// Runs `command` to its end; wall time, and the process's CPU time and peak RSS.
pub fn measure(mut command: Command) -> anyhow::Result<(Duration, Duration, i64)> {
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

/// Deletes and creates the peer's idempotency table (`id` its key, as Powertools expects).
pub async fn recreate_table(ddb: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<()> {
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

/// Invoices whose effect was applied exactly once.
pub async fn applied_once(stack: &Stack) -> anyhow::Result<usize> {
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

/// An item's size as DynamoDB bills it: attribute names and values in bytes (numbers
/// about one byte per two digits, containers three bytes plus one per element).
pub fn item_size(item: &std::collections::HashMap<String, AttributeValue>) -> usize {
    fn value(v: &AttributeValue) -> usize {
        match v {
            AttributeValue::S(s) => s.len(),
            AttributeValue::N(n) => n.trim_start_matches('-').len().div_ceil(2) + 1,
            AttributeValue::B(b) => b.as_ref().len(),
            AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
            AttributeValue::Ss(v) => v.iter().map(String::len).sum(),
            AttributeValue::Ns(v) => v.iter().map(|n| n.len().div_ceil(2) + 1).sum(),
            AttributeValue::L(l) => 3 + l.iter().map(|v| 1 + value(v)).sum::<usize>(),
            AttributeValue::M(m) => {
                3 + m.iter().map(|(k, v)| 1 + k.len() + value(v)).sum::<usize>()
            }
            _ => 0,
        }
    }
    item.iter().map(|(k, v)| k.len() + value(v)).sum()
}

async fn mean_item_bytes(stack: &Stack, table: &str) -> anyhow::Result<f64> {
    let items = stack.scan(table).await?;
    let total: usize = items.iter().map(item_size).sum();
    Ok(total as f64 / items.len().max(1) as f64)
}

/// The peer's process for `stack`.
pub fn peer_command(programs: &Programs, stack: &Stack, idempotency: &str) -> Command {
    let mut c = Command::new(&programs.python);
    c.arg(programs.peer_dir().join("powertools_worker.py"))
        .envs(stack.worker_env())
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("PEER_QUEUE_URL", &stack.queue_url)
        .env("PEER_IDEMPOTENCY_TABLE", idempotency)
        .env("PEER_EFFECTS_TABLE", &stack.effects_table);
    c
}

/// `rounds` runs of each side over `deliveries` envelopes.
pub async fn run(
    programs: &Programs,
    stack: &Stack,
    wire: &WireCounter,
    deliveries: usize,
    duplicate_share: f64,
    rounds: usize,
) -> anyhow::Result<Throughput> {
    let idempotency = format!("{}-powertools-idempotency", stack.name);
    let (bodies, invoices) = workload(deliveries, duplicate_share, 7);
    println!(
        "throughput: {deliveries} deliveries ({invoices} invoices, {} repeats), batches of 10, {rounds} rounds",
        deliveries - invoices,
    );
    let mut out = Throughput {
        deliveries,
        invoices,
        ..Throughput::default()
    };
    for round in 0..rounds {
        for side in Side::order(round) {
            stack.reset().await?;
            recreate_table(&stack.ddb, &idempotency).await?;
            stack.send_all(bodies.iter().map(String::as_str)).await?;
            wire.take();
            let mut command = match side {
                Side::Schedkit => {
                    let mut c = Command::new(&programs.worker);
                    c.args(["--until-drained", "--wait-seconds", "1"])
                        .envs(stack.worker_env())
                        .env("SCHEDKIT_WORKER_ID", "bench");
                    c
                }
                Side::Powertools => peer_command(programs, stack, &idempotency),
            };
            command.env("AWS_ENDPOINT_URL", wire.endpoint());
            let (wall, cpu, peak_rss_kb) =
                tokio::task::spawn_blocking(move || measure(command)).await??;
            let counts = wire.take();
            let once = applied_once(stack).await?;
            anyhow::ensure!(
                once == invoices,
                "{}: {once} of {invoices} invoices applied exactly once",
                side.label()
            );
            let mut item_bytes = BTreeMap::new();
            let tables = match side {
                Side::Schedkit => [stack.table.as_str(), stack.effects_table.as_str()],
                Side::Powertools => [idempotency.as_str(), stack.effects_table.as_str()],
            };
            for table in tables {
                item_bytes.insert(table.to_string(), mean_item_bytes(stack, table).await?);
            }
            println!(
                "  round {}: {:<34} {:>7.2} s wall, {:>6.3} ms CPU per delivery, peak RSS {:.1} MB",
                round + 1,
                side.label(),
                wall.as_secs_f64(),
                cpu.as_secs_f64() * 1000.0 / deliveries as f64,
                peak_rss_kb as f64 / 1024.0
            );
            out.runs.entry(side).or_default().push(Run {
                wall,
                cpu,
                peak_rss_kb,
                counts,
                item_bytes,
            });
        }
    }
    Ok(out)
}

/// Requests per delivery of a run, of the operations and tables `kind` accepts.
pub fn per_delivery(run: &Run, deliveries: usize, kind: impl Fn(&str, &str) -> bool) -> f64 {
    per(&run.counts, deliveries, kind)
}

/// Requests of `counts` that `kind` accepts, per `n` (deliveries, runs): shared by every
/// section that counts on the wire, so that their rows read the same way.
pub fn per(counts: &Counts, n: usize, kind: impl Fn(&str, &str) -> bool) -> f64 {
    let total: u64 = counts
        .iter()
        .filter(|((op, table), _)| kind(op, table))
        .map(|(_, n)| n)
        .sum();
    total as f64 / n as f64
}

/// A DynamoDB request, on any table.
pub fn dynamodb(op: &str, _table: &str) -> bool {
    op.starts_with("DynamoDB")
}

/// An SQS request, but for GetQueueAttributes: the harnesses' drained check (both sides'
/// in the throughput runs), which a worker in production does not make.
pub fn sqs(op: &str, _table: &str) -> bool {
    op.starts_with("AmazonSQS") && !op.ends_with("GetQueueAttributes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_repeats_its_share_of_invoices() {
        let (bodies, unique) = workload(100, 0.2, 1);
        assert_eq!((bodies.len(), unique), (100, 80));
        let distinct: std::collections::HashSet<_> = bodies.iter().collect();
        assert_eq!(distinct.len(), 80);
    }

    #[test]
    fn an_items_size_counts_names_and_values() {
        let item = [
            ("id".to_string(), AttributeValue::S("abcd".into())),
            ("n".to_string(), AttributeValue::N("1234".into())),
        ]
        .into_iter()
        .collect();
        assert_eq!(item_size(&item), 2 + 4 + 1 + 3);
    }
}
