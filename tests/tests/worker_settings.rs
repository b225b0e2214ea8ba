//! The worker binary started with the settings the README documents, and nothing else: it
//! finds its chains' state machines by the stage's names (`schedkit-<stage>.<chain>`, the
//! stage read from the table's name) when a chain's first trigger comes, even one created
//! after it started, and runs the chain to DONE; a chain whose machine of that name sends
//! its steps to another queue (another stage's) is dead-lettered under a reason of its
//! own, `unconfigured`, saying which setting to give.

use std::time::Duration;

use schedkit::catalog::Catalog;
use schedkit::dead_letter::attr;
use schedkit::{Envelope, Status};
use schedkit_testkit::chains::generated_state_machine_named;
use schedkit_testkit::{Stack, StackOptions, binary, localstack};

const CATALOG: &str = r#"
[jobs.record-invoice]
owner = "billing"
lease_seconds = 5

[chains.settle]
owner = "billing"
stages = ["invoice"]

[chains.settle.steps.invoice]
job = "record-invoice"
payload = { tenant = "acme", amount_cents = 100 }

# Its state machine of the stage's name sends its steps to another queue.
[chains.orphan]
owner = "billing"
stages = ["invoice"]

[chains.orphan.steps.invoice]
job = "record-invoice"
payload = { tenant = "acme", amount_cents = 200 }
"#;

/// The worker binary polling with the README's flags and AWS's own variables only.
fn documented_worker(stack: &Stack, catalog: &std::path::Path) -> tokio::process::Child {
    let aws = stack
        .worker_env()
        .into_iter()
        .filter(|(k, _)| k.starts_with("AWS_"));
    tokio::process::Command::new(binary("worker"))
        .args(["--queue-url", &stack.queue_url])
        .args(["--dlq-url", &stack.dlq_url])
        .args(["--table", &stack.table])
        .args(["--wait-seconds", "1"])
        .env_clear()
        .envs(aws)
        .env("SCHEDKIT_EFFECTS_TABLE", &stack.effects_table)
        .env("SCHEDKIT_CATALOG", catalog)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker binary starts (cargo build --bins)")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poller_with_only_the_documented_settings_runs_a_chain_to_done() {
    let stack = Stack::lane("settings", StackOptions::default()).await;
    let catalog = Catalog::parse(CATALOG, "catalog.toml").unwrap();
    let file = std::env::temp_dir().join(format!("{}-catalog.toml", stack.name));
    std::fs::write(&file, CATALOG).unwrap();
    // Started before the chain's state machine exists (a worker that starts while its
    // stage deploys): it looks the machine up when the trigger comes, not at start.
    let mut worker = documented_worker(&stack, &file);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sfn = aws_sdk_sfn::Client::new(&localstack().await);
    let name = schedkit::orchestrator::state_machine_name(&stack.name, "settle");
    generated_state_machine_named(&sfn, &catalog, "settle", &stack.queue_url, &name)
        .await
        .unwrap();
    // `orphan`'s machine of the right name sends its steps to another queue: another
    // stage's, not this worker's to start.
    let other_queue = stack.dlq_url.replace("-dlq", "-elsewhere");
    let orphan = schedkit::orchestrator::state_machine_name(&stack.name, "orphan");
    generated_state_machine_named(&sfn, &catalog, "orphan", &other_queue, &orphan)
        .await
        .unwrap();

    let at = "2026-12-01T03:00:00Z".parse().unwrap();
    stack
        .send_envelope(&Envelope::new("settle", at))
        .await
        .unwrap();
    stack
        .send_envelope(&Envelope::new("orphan", at))
        .await
        .unwrap();

    let key = "settle#2026-12-01T03:00:00Z";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let record = stack.record(key).await.unwrap();
        if record.as_ref().is_some_and(|r| r.status == Status::Done) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the chain did not end DONE: {record:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let step = stack
        .record(&format!("{key}#invoice"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(step.status, Status::Done);

    let letters = stack.drain_dlq(Duration::from_secs(20)).await.unwrap();
    worker.kill().await.ok();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let attribute = |name: &str| {
        letters[0]
            .message_attributes
            .as_ref()
            .and_then(|a| a.get(name))
            .and_then(|v| v.string_value.clone())
            .unwrap_or_default()
    };
    assert_eq!(attribute(attr::JOB), "orphan");
    assert_eq!(attribute(attr::REASON), "unconfigured");
    let error = attribute(attr::ERROR);
    assert!(
        error.contains("another queue") && error.contains("SCHEDKIT_STATE_MACHINE_PREFIX"),
        "{error}"
    );
}
