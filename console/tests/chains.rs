//! `schedkit chains` against a deployed stage on LocalStack: the shipped month-end chain
//! (report, then CRM sync and partner export side by side, then the summary) run by the
//! worker's processor on the stage's own state machine. The export fails for good while
//! the partner account is blocked, so the run pauses; `chains list` and `chains show`
//! (table and JSON snapshots) and `status` say so; `chains rerun` asks for confirmation,
//! refuses `--redrive` on a paused run, and once the account is fixed reruns the export
//! and the summary only, to DONE; audited. A second operator skips another paused run's
//! failed step with `chains skip` (its output given), and that run ends DONE. A run whose execution was aborted is rerun too,
//! and `--redrive` there is LocalStack's refusal, named; one cancelled while its execution
//! waits has it stopped. Every command runs as an IAM user holding only the stage's operator
//! policy, and used each of its chain actions.

use std::time::Duration;

use schedkit::batch::Chains;
use schedkit::{ExecutionRecord, Metrics, Processor, ProcessorConfig, Status};
use schedkit_testkit::{Stack, StackOptions, localstack, unique};

use super::operator::{Console, stable};

/// The chain run's record once `check` holds of it.
pub(crate) async fn run_until(
    stack: &Stack,
    key: &str,
    check: impl Fn(&ExecutionRecord) -> bool,
) -> ExecutionRecord {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(r) = stack.record(key).await.unwrap().filter(|r| check(r)) {
            return r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{key}: {:?}",
            stack.record(key).await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The worker's processor with the stage's chains, polling the stage until `stop` is sent
/// (its task ends once it has stopped): a worker process, inside the test.
pub(crate) fn chain_worker(
    stack: &Stack,
    sdk: &schedkit::aws::SdkConfig,
    id: &str,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<schedkit::poller::PollStats>,
) {
    let catalog = schedkit_worker::CATALOG.load().unwrap();
    let worker = Processor::new(
        stack.store(),
        stack.sqs.clone(),
        stack.example_registry(),
        ProcessorConfig {
            chains: Some(Chains::new(sdk, &catalog, &stack.state_machine_prefix())),
            ..stack.config(id)
        },
        Metrics::capture().0,
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let polling = tokio::spawn(async move {
        let options = schedkit::poller::PollOptions {
            wait_seconds: 1,
            max_messages: 10,
            until_drained: false,
            keep_reports: false,
            on_report: None,
        };
        schedkit::poller::poll(&worker, &options, async {
            let _ = stopped.await;
        })
        .await
    });
    (stop, polling)
}

/// The ARN of the execution a month-end run's record names.
fn execution_of(stack: &Stack, run: &ExecutionRecord) -> String {
    format!(
        "{}month-end:{}",
        stack
            .state_machine_prefix()
            .replacen(":stateMachine:", ":execution:", 1),
        run.owner.clone().unwrap()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chains_list_show_and_rerun_a_paused_month_end_from_its_failed_step_to_done() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("chains-console"), StackOptions::default())
        .await
        .unwrap();
    let (stop, polling) = chain_worker(&stack, &sdk, "worker-chains");
    let console = Console::operator(&stack).await;
    let key = "month-end#2026-11";

    // The month-end run, fired by hand; the partner account is blocked (no config item).
    console.ok(&["fire", "month-end", "--key", key]);
    let paused = run_until(&stack, key, |r| r.status != Status::Running).await;
    assert_eq!(paused.status, Status::Paused, "{paused:?}");
    let snap_text = |name: &str, text: &str| {
        insta::assert_snapshot!(name, stable(text, &stack.name));
    };
    let snap = |name: &str, args: &[&str]| snap_text(name, &console.ok(args));
    snap("chains_list", &["chains", "list"]);
    snap("chains_list_json", &["--output", "json", "chains", "list"]);
    snap("chains_show_paused", &["chains", "show", key]);
    snap(
        "chains_show_paused_json",
        &["--output", "json", "chains", "show", key],
    );
    let status = console.ok(&["status"]);
    assert!(
        status.contains(&format!("paused chain   {key} since "))
            && status.contains("step `orders-export` failed: schedkit.attempts-exhausted")
            && status.contains(&format!("`schedkit chains rerun {key}`")),
        "{status}"
    );

    // A second run pauses as well: another operator skips its failed step below.
    let skipped = "month-end#2026-12";
    console.ok(&["fire", "month-end", "--key", skipped]);
    let second = run_until(&stack, skipped, |r| r.status != Status::Running).await;
    assert_eq!(second.status, Status::Paused, "{second:?}");

    // Without --yes and no terminal: refused, nothing changed.
    let unconfirmed = console.run(&["chains", "rerun", key]);
    assert_eq!(unconfirmed.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&unconfirmed.stderr).contains("refusing without --yes"),
        "{unconfirmed:?}"
    );
    // A paused run's execution succeeded: nothing to redrive.
    let redrive = console.run(&["chains", "rerun", key, "--redrive", "--yes"]);
    assert_eq!(redrive.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&redrive.stderr).contains("rerun it without --redrive"),
        "{redrive:?}"
    );
    assert_eq!(
        stack.record(key).await.unwrap().unwrap().status,
        Status::Paused
    );

    // The fix, then the rerun: the export (a fresh round) and the summary run; the report
    // and the CRM sync answer from their records.
    stack.activate_partner_account().await.unwrap();
    let rerun = console.ok(&["--output", "json", "chains", "rerun", key, "--yes"]);
    let said: serde_json::Value = serde_json::from_str(&rerun).unwrap();
    assert_eq!(
        said["steps"],
        serde_json::json!(["orders-export", "summary"])
    );
    snap_text("chains_rerun_json", &rerun);
    let done = run_until(&stack, key, |r| r.status != Status::Running).await;
    assert_eq!(done.status, Status::Done, "{done:?}");
    snap("chains_show_done", &["chains", "show", key]);
    let step = |s: &str| format!("{key}#{s}");
    let report = stack.record(&step("usage-report")).await.unwrap().unwrap();
    assert_eq!(report.attempt, 1, "the report ran again: {report:?}");
    let export = stack.record(&step("orders-export")).await.unwrap().unwrap();
    assert_eq!(
        (export.status, export.attempt, export.round_attempt()),
        (Status::Done, 4, 1)
    );
    let audit = std::fs::read_to_string(&console.audit).unwrap();
    let line: serde_json::Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    assert_eq!(line["what"], "chains rerun");
    assert_eq!(line["details"]["key"], key);
    assert_eq!(
        (&line["phase"], &line["finished"]),
        (&"end".into(), &true.into())
    );
    assert_eq!(line["result"]["run"], 2);
    // A second operator skips the other run's failed export from the command line (its
    // output given for the summary): the step is DONE, the summary runs, the run is DONE,
    // and the step says who skipped it.
    let bob = Console::another_operator(&stack, "bob").await;
    bob.ok(&[
        "chains",
        "skip",
        skipped,
        "orders-export",
        "--reason",
        "exported by hand",
        "--step-output",
        r#"{"rows": 0}"#,
        "--yes",
    ]);
    let done = run_until(&stack, skipped, |r| r.status != Status::Running).await;
    assert_eq!(done.status, Status::Done, "{done:?}");
    let export = stack
        .record(&format!("{skipped}#orders-export"))
        .await
        .unwrap()
        .unwrap();
    let by = export
        .skipped
        .as_ref()
        .map(|s| (s.by.as_str(), s.reason.as_str()));
    assert!(
        by.is_some_and(|(by, reason)| by.ends_with("-bob") && reason == "exported by hand"),
        "{export:?}"
    );
    let summary = stack
        .record(&format!("{skipped}#summary"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(summary.status, Status::Done, "{summary:?}");

    let again = console.run(&["chains", "rerun", key, "--yes"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is DONE: nothing to rerun"),
        "{again:?}"
    );

    // A run whose execution was stopped stays RUNNING with no outcome: `show`
    // says so, `--redrive` is LocalStack's refusal (named), a rerun takes it to DONE.
    let aborted = "month-end#2026-10";
    console.ok(&["fire", "month-end", "--key", aborted]);
    let running = run_until(&stack, aborted, |r| r.owner.is_some()).await;
    let sfn = aws_sdk_sfn::Client::new(&sdk);
    let execution = execution_of(&stack, &running);
    // The record names its execution before the worker starts it: wait until it runs.
    while sfn
        .describe_execution()
        .execution_arn(&execution)
        .send()
        .await
        .is_err()
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sfn.stop_execution()
        .execution_arn(&execution)
        .send()
        .await
        .unwrap();
    while sfn
        .describe_execution()
        .execution_arn(&execution)
        .send()
        .await
        .unwrap()
        .status
        == aws_sdk_sfn::types::ExecutionStatus::Running
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let shown = console.ok(&["chains", "show", aborted]);
    // (LocalStack reports a stopped execution FAILED; AWS, ABORTED.)
    assert!(
        (shown.contains("  ABORTED\n") || shown.contains("  FAILED\n"))
            && shown.contains(&format!(
                "`schedkit chains rerun {aborted}` runs what is not DONE"
            )),
        "{shown}"
    );
    let redrive = console.run(&["chains", "rerun", aborted, "--redrive", "--yes"]);
    assert_eq!(redrive.status.code(), Some(1), "{redrive:?}");
    assert!(
        String::from_utf8_lossy(&redrive.stderr).contains("redriving execution"),
        "{redrive:?}"
    );
    // (Which steps it runs depends on how far the stopped execution got.)
    let rerun = console.ok(&["chains", "rerun", aborted, "--yes"]);
    assert!(
        rerun.starts_with(&format!("{aborted}: run 2 started (execution "))
            && rerun.contains("; to run: ")
            && rerun.contains("summary; DONE steps answer from their records"),
        "{rerun}"
    );
    let done = run_until(&stack, aborted, |r| r.status != Status::Running).await;
    assert_eq!((done.status, done.attempt), (Status::Done, 2), "{done:?}");

    // A run cancelled while its execution waits for a step: the execution is stopped.
    let cancelled = "month-end#2026-09";
    console.ok(&["fire", "month-end", "--key", cancelled]);
    let running = run_until(&stack, cancelled, |r| r.owner.is_some()).await;
    let execution = execution_of(&stack, &running);
    let status = || async {
        sfn.describe_execution()
            .execution_arn(&execution)
            .send()
            .await
            .ok()
            .map(|d| d.status)
    };
    while status().await != Some(aws_sdk_sfn::types::ExecutionStatus::Running) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // No worker from here on: the execution waits for its steps' answers.
    let _ = stop.send(());
    polling.await.unwrap();
    let said = console.ok(&[
        "chains",
        "cancel",
        cancelled,
        "--reason",
        "not this month",
        "--yes",
    ]);
    assert_eq!(
        stack.record(cancelled).await.unwrap().unwrap().status,
        Status::Cancelled
    );
    // (The stopped execution's end is the chains integration test's: LocalStack ends an
    // execution that waits for a callback only once something answers it.)
    assert!(said.contains("; execution stopped: "), "{said}");

    // Every chain action the operator policy grants was used, through it.
    let used: std::collections::BTreeSet<String> = console
        .user()
        .decisions()
        .await
        .unwrap()
        .into_iter()
        .filter(|d| d.allowed && d.action.starts_with("states:"))
        .map(|d| d.action)
        .collect();
    assert_eq!(
        used,
        super::roles::CHAIN_ACTIONS.map(String::from).into(),
        "the chain actions used"
    );
}
