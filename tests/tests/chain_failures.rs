//! A chain step whose worker is lost, against a generated state machine on LocalStack:
//!
//! - the worker process running the step is SIGKILLed half-way: another worker process
//!   claims the step once the lease has run out, finishes it and answers the task, and the
//!   step's effect is applied once;
//! - the worker process running the step stops answering (SIGSTOP: no lease heartbeat, no
//!   task heartbeat, its message held): the step's heartbeat timeout makes Step Functions
//!   send the step again, another worker runs it once, and the stale run, woken (SIGCONT),
//!   is fenced off by the step's record.

use std::time::Duration;

use aws_sdk_sfn::types::ExecutionStatus;
use schedkit::catalog::Catalog;
use schedkit::{Envelope, ExecutionRecord, Status};
use schedkit_testkit::chains::{generated_state_machine, state_machine_prefix};
use schedkit_testkit::{Stack, localstack};

/// One chain, one step: an invoice that takes `render_seconds` before its write (the
/// example worker's `record-invoice`, whose write is an effect committed with its record).
/// Its lease is 5 s, not less: a LocalStack busy with the other tests can be silent for
/// over a second, and an owner gives up its attempt when its lease is not confirmed within
/// the lease less the clock-skew bound (with a 2 s lease, two such stalls in a row failed
/// the step for good and paused the chain).
const CATALOG: &str = r#"
[jobs.record-invoice]
owner = "billing"
lease_seconds = 5

[jobs.record-invoice.retry]
max_attempts = 3
first_delay_seconds = 1
base_delay_seconds = 1
max_delay_seconds = 2

[chains.settle]
owner = "billing"
stages = ["invoice"]

[chains.settle.steps.invoice]
job = "record-invoice"
payload = { tenant = "acme", amount_cents = 100, render_seconds = 4 }
"#;

async fn machine(stack: &Stack, catalog: &Catalog) -> (aws_sdk_sfn::Client, String) {
    let sfn = aws_sdk_sfn::Client::new(&localstack().await);
    let arn = generated_state_machine(&sfn, catalog, "settle", &stack.queue_url)
        .await
        .unwrap();
    (sfn, arn)
}

/// Waits until `check` holds of the record `key` (up to `within`).
async fn record_until(
    stack: &Stack,
    key: &str,
    within: Duration,
    check: impl Fn(&ExecutionRecord) -> bool,
) -> ExecutionRecord {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(r) = stack.record(key).await.unwrap().filter(|r| check(r)) {
            return r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "`{key}` did not get there: {:?}",
            stack.record(key).await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn executions(sfn: &aws_sdk_sfn::Client, machine: &str) -> Vec<ExecutionStatus> {
    sfn.list_executions()
        .state_machine_arn(machine)
        .send()
        .await
        .unwrap()
        .executions
        .into_iter()
        .map(|e| e.status)
        .collect()
}

/// The example worker binary in polling mode, with the test's catalog and state machines;
/// its stdout (JSON logs) into `log` when given.
fn worker_process(
    stack: &Stack,
    catalog: &std::path::Path,
    prefix: &str,
    id: &str,
    log: Option<&std::path::Path>,
) -> tokio::process::Child {
    let stdout = match log {
        Some(path) => std::fs::File::create(path).unwrap().into(),
        None => std::process::Stdio::null(),
    };
    tokio::process::Command::new(schedkit_testkit::binary("worker"))
        .args(["--wait-seconds", "1"])
        .envs(stack.worker_env())
        .env("SCHEDKIT_CATALOG", catalog)
        .env("SCHEDKIT_STATE_MACHINE_PREFIX", prefix)
        .env("SCHEDKIT_WORKER_ID", id)
        .stdout(stdout)
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the worker binary starts (cargo build --bins)")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_sigkilled_mid_step_leaves_it_to_another_that_finishes_it_and_applies_it_once() {
    let stack = Stack::with_visibility_timeout("chain-kill", 30).await;
    let catalog = Catalog::parse(CATALOG, "catalog.toml").unwrap();
    let (sfn, machine) = machine(&stack, &catalog).await;
    let prefix = state_machine_prefix(&machine, "settle");
    let file = std::env::temp_dir().join(format!("{}-catalog.toml", stack.name));
    std::fs::write(&file, CATALOG).unwrap();

    let mut first = worker_process(&stack, &file, prefix, "doomed", None);
    stack
        .send_envelope(&Envelope::new(
            "settle",
            "2026-12-01T03:00:00Z".parse().unwrap(),
        ))
        .await
        .unwrap();
    let key = "settle#2026-12-01T03:00:00Z";
    let step = format!("{key}#invoice");
    // The first worker is rendering the invoice (4 s, its lease 5 s kept by heartbeats).
    record_until(&stack, &step, Duration::from_secs(30), |r| {
        r.status == Status::Running && r.owner.as_deref().is_some_and(|o| o.starts_with("doomed"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    first.start_kill().unwrap(); // SIGKILL
    first.wait().await.unwrap();
    assert_eq!(
        stack.effect_applied(&step).await.unwrap(),
        0,
        "the killed run applied its effect"
    );

    let mut second = worker_process(&stack, &file, prefix, "rescuer", None);
    let chain = record_until(&stack, key, Duration::from_secs(60), |r| {
        r.status != Status::Running
    })
    .await;
    second.start_kill().unwrap();
    second.wait().await.unwrap();
    assert_eq!(chain.status, Status::Done, "{chain:?}");
    let record = stack.record(&step).await.unwrap().unwrap();
    assert_eq!(record.status, Status::Done);
    assert!(
        record
            .owner
            .as_deref()
            .is_some_and(|o| o.starts_with("rescuer")),
        "{record:?}"
    );
    assert_eq!(
        record.attempt, 2,
        "claimed again after the lease: {record:?}"
    );
    assert_eq!(stack.effect_applied(&step).await.unwrap(), 1);
    assert_eq!(
        executions(&sfn, &machine).await,
        [ExecutionStatus::Succeeded],
        "one execution, its task completed"
    );
}

/// Sends `signal` (`STOP`, `CONT`) to the process `child`.
fn signal(child: &tokio::process::Child, signal: &str) {
    let pid = child.id().expect("the worker is running").to_string();
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{signal} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_worker_stops_answering_is_sent_again_after_its_heartbeat_timeout_and_runs_once()
 {
    // The workers' longest lease (a report's, 5 minutes) is how long a received message
    // stays hidden: the silent worker's message does not come back during the test, so
    // only Step Functions can send the step again.
    let catalog_text = format!(
        "[settings]\nfunction_timeout_seconds = 900\n{CATALOG}\n[jobs.long-report]\nowner = \"data\"\nlease_seconds = 300\n"
    );
    let stack = Stack::with_visibility_timeout("chain-silent", 30).await;
    let catalog = Catalog::parse(&catalog_text, "catalog.toml").unwrap();
    let heartbeat = schedkit::iac::render_definition(&catalog, catalog.chain("settle").unwrap());
    assert!(
        heartbeat
            .replace(' ', "")
            .contains("\"HeartbeatSeconds\":45"),
        "the step's heartbeat timeout: {heartbeat}"
    );
    let (sfn, machine) = machine(&stack, &catalog).await;
    let prefix = state_machine_prefix(&machine, "settle");
    let file = std::env::temp_dir().join(format!("{}-catalog.toml", stack.name));
    std::fs::write(&file, &catalog_text).unwrap();
    let log = std::env::temp_dir().join(format!("{}-silent.log", stack.name));

    let mut silent = worker_process(&stack, &file, prefix, "silent", Some(&log));
    stack
        .send_envelope(&Envelope::new(
            "settle",
            "2026-12-01T04:00:00Z".parse().unwrap(),
        ))
        .await
        .unwrap();
    let key = "settle#2026-12-01T04:00:00Z";
    let step = format!("{key}#invoice");
    record_until(&stack, &step, Duration::from_secs(30), |r| {
        r.status == Status::Running && r.owner.as_deref().is_some_and(|o| o.starts_with("silent"))
    })
    .await;
    // It stops answering: no lease heartbeat, no task heartbeat, its message held.
    signal(&silent, "STOP");

    let mut rescuer = worker_process(&stack, &file, prefix, "rescuer", None);
    let chain = record_until(&stack, key, Duration::from_secs(120), |r| {
        r.status != Status::Running
    })
    .await;
    assert_eq!(chain.status, Status::Done, "{chain:?}");
    let record = stack.record(&step).await.unwrap().unwrap();
    assert_eq!(record.status, Status::Done);
    assert!(
        record
            .owner
            .as_deref()
            .is_some_and(|o| o.starts_with("rescuer")),
        "{record:?}"
    );
    assert_eq!(
        executions(&sfn, &machine).await,
        [ExecutionStatus::Succeeded],
        "one execution: Step Functions sent the step again within it"
    );

    // The silent worker wakes: the step's record fences its run off; nothing is applied
    // twice.
    signal(&silent, "CONT");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("LEASE_LOST")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the woken run was not fenced off: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    silent.start_kill().unwrap();
    rescuer.start_kill().unwrap();
    let _ = (silent.wait().await, rescuer.wait().await);
    assert_eq!(stack.effect_applied(&step).await.unwrap(), 1);
    let record = stack.record(&step).await.unwrap().unwrap();
    assert_eq!(record.status, Status::Done, "{record:?}");
}
