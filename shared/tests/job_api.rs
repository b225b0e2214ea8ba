//! The job API as a team meets it, through `schedkit::testing`: extractors, `?` on any
//! error, `permanent`, state built once, and what a duplicate, a retry, a lost lease and a
//! lost answer do to a run and its effects.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Put};
use schedkit::catalog::Catalog;
use schedkit::dead_letter::attr;
use schedkit::testing::{StoreRequest, TestWorker};
use schedkit::{Ctx, Envelope, FromRef, JobError, Jobs, Payload, State, Status, permanent};
use serde::Deserialize;
use serde_json::{Value, json};

const CATALOG: &str = r#"
[jobs.invoice]
owner = "billing"
lease_seconds = 10
[jobs.invoice.retry]
max_attempts = 3

[jobs.import]
owner = "data"
lease_seconds = 10
[jobs.import.retry]
max_attempts = 3

[jobs.fragile]
owner = "data"
lease_seconds = 10
[jobs.fragile.retry]
max_attempts = 2

[jobs.render]
owner = "billing"
lease_seconds = 4
[jobs.render.retry]
max_attempts = 3
"#;

#[derive(Debug, Deserialize)]
struct Invoice {
    tenant: String,
    lines: Vec<Line>,
}

#[derive(Debug, Deserialize)]
struct Line {
    amount_cents: i64,
}

/// State built once: a table name and a counter of attempts, each taken as its own part.
#[derive(Clone)]
struct App {
    table: Table,
    attempts: Attempts,
}

#[derive(Clone)]
struct Table(String);

#[derive(Clone, Default)]
struct Attempts(Arc<AtomicU32>);

impl FromRef<App> for Table {
    fn from_ref(app: &App) -> Self {
        app.table.clone()
    }
}

impl FromRef<App> for Attempts {
    fn from_ref(app: &App) -> Self {
        app.attempts.clone()
    }
}

/// Sums the lines and hands the invoice row to schedkit as an effect.
async fn invoice(
    ctx: Ctx,
    State(Table(table)): State<Table>,
    Payload(invoice): Payload<Invoice>,
) -> Result<Value, JobError> {
    let total: i64 = invoice.lines.iter().map(|l| l.amount_cents).sum();
    let put = Put::builder()
        .table_name(table)
        .item("effect_key", AttributeValue::S(ctx.key.clone()))
        .item("tenant", AttributeValue::S(invoice.tenant))
        .item("total", AttributeValue::N(total.to_string()))
        .build()
        .map_err(permanent)?;
    ctx.effects().put(put);
    Ok(json!({ "total": total }))
}

/// Reads a file that is missing on the first attempt: `?` on the `io::Error`.
async fn import(State(Attempts(attempts)): State<Attempts>) -> Result<u32, JobError> {
    let attempt = attempts.fetch_add(1, Ordering::SeqCst) + 1;
    if attempt == 1 {
        std::fs::read_to_string("/nonexistent/schedkit/import.csv")?;
    }
    Ok(attempt)
}

/// A payload type whose deserialisation panics (a `deserialize_with` that unwraps).
struct Fragile;

impl<'de> serde::Deserialize<'de> for Fragile {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        panic!("a bug in the payload's type")
    }
}

async fn fragile(Payload(_): Payload<Fragile>) -> Result<(), JobError> {
    Ok(())
}

/// Works longer than its 4 s lease, kept by heartbeats every second.
async fn render(ctx: Ctx, State(Table(table)): State<Table>) -> Result<(), JobError> {
    tokio::time::sleep(Duration::from_secs(12)).await;
    let put = Put::builder()
        .table_name(table)
        .item("effect_key", AttributeValue::S(ctx.key.clone()))
        .build()
        .map_err(permanent)?;
    ctx.effects().put(put);
    Ok(())
}

fn worker() -> (TestWorker, Attempts) {
    let catalog = Catalog::parse(CATALOG, "catalog.toml").unwrap();
    let attempts = Attempts::default();
    let app = App {
        table: Table("effects".into()),
        attempts: attempts.clone(),
    };
    let jobs = Jobs::with_state(app)
        .add("invoice", invoice)
        .add("import", import)
        .add("render", render)
        .add("fragile", fragile);
    (TestWorker::new(&catalog, jobs).unwrap(), attempts)
}

fn run(job: &str, key: &str, payload: Value) -> Envelope {
    Envelope::new(job, "2026-12-02T08:00:00Z".parse().unwrap())
        .with_key(key)
        .with_payload(payload)
}

#[tokio::test(start_paused = true)]
async fn a_payload_extracts_as_the_jobs_type_and_its_result_is_kept() {
    let (worker, _) = worker();
    let lines = json!({"tenant": "acme", "lines": [{"amount_cents": 1250}, {"amount_cents": 50}]});
    worker.send(&run("invoice", "inv-1", lines));
    assert_eq!(worker.run_until_idle().await, ["succeeded"]);
    let record = worker.record("inv-1").unwrap();
    assert_eq!(record.status, Status::Done);
    assert_eq!(record.result.as_deref(), Some(r#"{"total":1300}"#));
    assert_eq!(worker.effects("inv-1").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_bad_payload_field_is_a_permanent_error_naming_its_path() {
    let (worker, _) = worker();
    let bad = json!({"tenant": "acme", "lines": [{"amount_cents": 1}, {"amount_cents": "12.50"}]});
    worker.send(&run("invoice", "inv-bad", bad));
    assert_eq!(worker.run_until_idle().await, ["dead-lettered"]);
    let record = worker.record("inv-bad").unwrap();
    assert_eq!((record.status, record.attempt), (Status::Failed, 1));
    let error = record.last_error.unwrap();
    assert_eq!(
        error,
        "payload field `lines[1].amount_cents`: invalid type: string, expected i64"
    );
    let letters = worker.dead_letters();
    assert_eq!(letters.len(), 1);
    let reason = &letters[0].attributes[attr::REASON];
    assert_eq!(reason.string.as_deref(), Some("permanent-error"));
    assert!(worker.effects("inv-bad").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_question_mark_on_an_io_error_is_retried() {
    let (worker, attempts) = worker();
    worker.send(&run("import", "imp-1", json!({})));
    assert_eq!(worker.run_until_idle().await, ["retrying", "succeeded"]);
    let record = worker.record("imp-1").unwrap();
    assert_eq!((record.status, record.attempt), (Status::Done, 2));
    assert_eq!(record.result.as_deref(), Some("2"));
    assert_eq!(attempts.0.load(Ordering::SeqCst), 2);
    let first = &record.history[0];
    let error = first.error.as_deref().unwrap_or_default();
    assert!(error.contains("No such file or directory"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_duplicate_delivery_applies_the_effect_once() {
    let (worker, _) = worker();
    let lines = json!({"tenant": "acme", "lines": [{"amount_cents": 7}]});
    worker.send(&run("invoice", "inv-dup", lines.clone()));
    assert_eq!(worker.run_until_idle().await, ["succeeded"]);
    worker.send(&run("invoice", "inv-dup", lines));
    assert_eq!(worker.run_until_idle().await, ["duplicate"]);
    assert_eq!(worker.effects("inv-dup").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_lost_lease_cancels_the_attempt_and_the_next_one_commits_once() {
    let (worker, _) = worker();
    // Every heartbeat of the first attempt is refused: its lease runs out at 4 s, long
    // before the 12 s job ends, and the attempt is cancelled without committing.
    worker.refuse(StoreRequest::Heartbeat, 4);
    worker.send(&run("render", "r-1", json!({})));
    let outcomes = worker.run_until_idle().await;
    assert_eq!(outcomes.first(), Some(&"retrying"), "{outcomes:?}");
    assert_eq!(outcomes.last(), Some(&"succeeded"), "{outcomes:?}");
    let record = worker.record("r-1").unwrap();
    assert_eq!((record.status, record.attempt), (Status::Done, 2));
    let first = record.history[0].error.clone().unwrap_or_default();
    assert!(first.contains("lease"), "{first}");
    assert_eq!(worker.effects("r-1").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_lost_commit_answer_is_answered_from_the_record_not_run_again() {
    let (worker, _) = worker();
    worker.lose_answer(StoreRequest::Commit, 1);
    let lines = json!({"tenant": "acme", "lines": [{"amount_cents": 7}]});
    worker.send(&run("invoice", "inv-lost", lines));
    assert_eq!(worker.run_until_idle().await, ["unavailable", "duplicate"]);
    assert_eq!(worker.effects("inv-lost").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_panic_while_making_the_arguments_is_a_failed_attempt_that_says_so() {
    let (worker, _) = worker();
    worker.send(&run("fragile", "f-1", json!({})));
    assert_eq!(worker.run_until_idle().await, ["retrying", "dead-lettered"]);
    let record = worker.record("f-1").unwrap();
    assert_eq!((record.status, record.attempt), (Status::Failed, 2));
    let error = record.last_error.unwrap_or_default();
    assert!(
        error.contains("job panicked: a bug in the payload's type"),
        "{error}"
    );
}
