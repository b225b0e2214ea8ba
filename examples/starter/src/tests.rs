//! The starter's jobs through schedkit's real pipeline, without AWS: `cargo test`.
//! `schedkit::testing` runs them over an in-memory store and queue, on tokio's paused
//! clock, with the policies of `catalog.toml`.

use schedkit::testing::{StoreRequest, TestWorker};
use schedkit::{Envelope, Status};
use serde_json::json;

use super::{CATALOG, jobs};

fn worker() -> TestWorker {
    let catalog = CATALOG.load().expect("catalog.toml is valid");
    let effects = Some("signups".to_string());
    TestWorker::new(&catalog, jobs(effects)).expect("every job of the catalog is implemented")
}

fn signup(email: &str) -> Envelope {
    Envelope::new("record-signup", "2026-12-02T08:00:00Z".parse().unwrap())
        .with_payload(json!({"email": email, "plan": "pro"}))
}

#[tokio::test(start_paused = true)]
async fn a_duplicate_delivery_records_the_signup_once() {
    let worker = worker();
    worker.send(&signup("ada@example.com"));
    worker.send(&signup("ada@example.com"));
    // Both copies arrive in one batch: one runs, the other finds it running (`in-progress`)
    // and comes back to find it DONE (`duplicate`).
    let outcomes = worker.run_until_idle().await;
    assert_eq!(
        outcomes.iter().filter(|o| **o == "succeeded").count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(outcomes.last(), Some(&"duplicate"));
    let key = "signup:ada@example.com";
    assert_eq!(worker.record(key).unwrap().status, Status::Done);
    assert_eq!(worker.effects(key).len(), 1, "one item, committed once");
}

#[tokio::test(start_paused = true)]
async fn a_commit_dynamodb_refused_is_retried_and_applied_once() {
    let worker = worker();
    worker.refuse(StoreRequest::Commit, 1);
    worker.send(&signup("grace@example.com"));
    assert_eq!(worker.run_until_idle().await, ["unavailable", "succeeded"]);
    let record = worker.record("signup:grace@example.com").unwrap();
    assert_eq!((record.status, record.attempt), (Status::Done, 2));
    assert_eq!(worker.effects("signup:grace@example.com").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_commit_whose_answer_is_lost_is_not_applied_twice() {
    let worker = worker();
    worker.lose_answer(StoreRequest::Commit, 1);
    worker.send(&signup("alan@example.com"));
    // The commit was applied; the message comes back and finds the run DONE.
    assert_eq!(worker.run_until_idle().await, ["unavailable", "duplicate"]);
    assert_eq!(worker.effects("signup:alan@example.com").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_signup_without_email_fails_for_good_naming_the_field() {
    let worker = worker();
    let run = Envelope::new("record-signup", "2026-12-02T08:00:00Z".parse().unwrap())
        .with_key("no-email")
        .with_payload(json!({"plan": "pro"}));
    worker.send(&run);
    assert_eq!(worker.run_until_idle().await, ["dead-lettered"]);
    let record = worker.record("no-email").unwrap();
    assert_eq!(record.status, Status::Failed);
    assert_eq!(
        record.last_error.as_deref(),
        Some("payload: missing field `email`")
    );
}

#[tokio::test(start_paused = true)]
async fn a_greeting_names_who_it_greets() {
    let worker = worker();
    let run = Envelope::new("greet", "2026-12-02T07:00:00Z".parse().unwrap())
        .with_key("morning")
        .with_payload(json!({"name": "team"}));
    worker.send(&run);
    assert_eq!(worker.run_until_idle().await, ["succeeded"]);
    let result = worker.record("morning").unwrap().result.unwrap();
    assert_eq!(result, json!({"greeting": "Hello, team!"}).to_string());
}
