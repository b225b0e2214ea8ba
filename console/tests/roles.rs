//! The stage's viewer and operator policies, as the template deploys them, on a LocalStack
//! that refuses what an IAM user's policies do not allow: a viewer reads everything but
//! the dead letters' bodies (a receive hides them) and changes nothing (each refusal names
//! the permission and the policy that grants it); an operator does every console action;
//! the actions each used are the policy's; nobody acts under another name.

use std::collections::BTreeSet;

use aws_sdk_scheduler::types::ScheduleState;
use schedkit::Envelope;
use schedkit::iac::roles::{GRANTS, Role};
use schedkit_testkit::roles::{User, policy_arn};
use schedkit_testkit::{Stack, StackOptions, localstack, unique};

use super::operator::Console;
use super::pause::state_of;

/// Actions only a chain's run uses (`chains show` of a running run, rerun, cancel): the
/// console's chains test runs them through its operator's policy.
pub(crate) const CHAIN_ACTIONS: [&str; 4] = [
    "states:DescribeExecution",
    "states:StartExecution",
    "states:StopExecution",
    "states:RedriveExecution",
];

/// The actions a role's grants allow, but those only chains use.
fn granted(role: Role) -> BTreeSet<String> {
    GRANTS
        .iter()
        .filter(|g| g.role <= role)
        .flat_map(|g| g.actions.iter().map(|a| (*a).to_string()))
        .filter(|a| !CHAIN_ACTIONS.contains(&a.as_str()))
        .collect()
}

/// Sends `n` envelopes of `job` straight to the DLQ (as dead letters of unknown reason).
async fn dead_letters(stack: &Stack, job: &str, n: usize) {
    for i in 0..n {
        let envelope = Envelope::new(job, "2026-12-01T00:00:00Z".parse().unwrap())
            .with_key(format!("{}-{job}-{i}", unique("dead")));
        stack
            .sqs
            .send_message()
            .queue_url(&stack.dlq_url)
            .message_body(envelope.to_json())
            .send()
            .await
            .unwrap();
    }
}

async fn schedule_state(stack: &Stack, job: &str) -> ScheduleState {
    let scheduler = aws_sdk_scheduler::Client::new(&localstack().await);
    state_of(&scheduler, &stack.schedule_group, job).await
}

/// A session of the role `<stage>-<name>`, holding the stage's policy for `role`.
async fn session(stack: &Stack, role: Role, name: &str) -> User {
    let name = format!("{}-{name}", stack.name);
    User::assuming(&name, &[policy_arn(&stack.name, role)])
        .await
        .unwrap()
}

/// The actions LocalStack allowed the console's user.
async fn used(console: &Console) -> BTreeSet<String> {
    let decisions = console.user().decisions().await.unwrap();
    decisions
        .into_iter()
        .filter(|d| d.allowed)
        .map(|d| d.action)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_reads_everything_and_changes_nothing_an_operator_does_every_action() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("roles"), StackOptions::default())
        .await
        .unwrap();
    let viewer = Console::viewer(&stack).await;
    let operator = Console::operator(&stack).await;
    // A schedule the catalog does not have, for the sync to delete.
    stack.create_schedule(&sdk, "stray").await.unwrap();

    // The operator: every kind of action the console has.
    operator.ok(&["schedules", "sync", "--yes"]);
    assert_eq!(
        schedule_state(&stack, "long-report").await,
        ScheduleState::Enabled
    );
    operator.ok(&["jobs", "pause", "long-report", "--reason", "roles test"]);
    assert_eq!(
        schedule_state(&stack, "long-report").await,
        ScheduleState::Disabled
    );
    operator.ok(&["jobs", "resume", "long-report"]);
    operator.ok(&["fire", "record-invoice", "--key", "roles-queued"]);
    operator.ok(&["fire", "long-report", "--key", "roles-now"]);
    operator.ok(&["fire", "long-report", "--in", "2h", "--key", "roles-later"]);
    operator.ok(&[
        "executions",
        "cancel",
        "--job",
        "record-invoice",
        "--reason",
        "roles test",
        "--yes",
    ]);
    dead_letters(&stack, "record-invoice", 2).await;
    dead_letters(&stack, "flaky-sync", 1).await;
    assert!(operator.ok(&["dlq", "list"]).contains("record-invoice"));
    operator.ok(&["dlq", "redrive", "--job", "record-invoice", "--yes"]);
    operator.ok(&["dlq", "redrive", "--yes"]);
    dead_letters(&stack, "partner-export", 1).await;
    operator.ok(&["dlq", "purge", "--yes"]);
    operator.ok(&["audit"]);
    operator.ok(&["status"]);

    // The viewer: every read.
    dead_letters(&stack, "flaky-sync", 1).await;
    for read in [
        &["status"][..],
        &["jobs"],
        &["executions", "list"],
        &["executions", "list", "--job", "record-invoice"],
        &["executions", "show", "roles-queued"],
        &["chains", "list"],
        &["schedules", "sync", "--dry-run"],
        &["audit"],
    ] {
        viewer.ok(read);
    }
    assert!(
        viewer
            .ok(&["executions", "show", "roles-queued"])
            .contains("CANCELLED")
    );
    // An alarm in ALARM (LocalStack evaluates none: set by hand): the viewer's status names
    // it, reading it and its contributors (which LocalStack does not emulate: said so).
    let failed = schedkit::iac::stage_alarms::alarm_name(&stack.name, "jobs-failed");
    aws_sdk_cloudwatch::Client::new(&sdk)
        .set_alarm_state()
        .alarm_name(&failed)
        .state_value(aws_sdk_cloudwatch::types::StateValue::Alarm)
        .state_reason("set by the roles test")
        .send()
        .await
        .unwrap();
    let status: serde_json::Value =
        serde_json::from_str(&viewer.ok(&["--output", "json", "status"])).unwrap();
    let in_alarm = &status["alarms"]["in_alarm"][0];
    assert_eq!(in_alarm["alarm"], failed.as_str(), "{status:#}");
    assert!(
        in_alarm["reason"]
            .as_str()
            .unwrap()
            .starts_with("set by the roles test"),
        "{status:#}"
    );
    operator.ok(&["status"]);
    // The listing's filters apply before its limit: the one purge among all the entries.
    let purge: serde_json::Value = serde_json::from_str(&viewer.ok(&[
        "--output",
        "json",
        "audit",
        "--action",
        "dlq purge",
        "--limit",
        "1",
    ]))
    .unwrap();
    assert_eq!(purge[0]["what"], "dlq purge", "{purge}");
    // A viewer does not receive dead letters: a receive hides them (for as long as the
    // receiver asks), which is an operator's to do.
    let out = viewer.run(&["dlq", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("AWS refused sqs:ReceiveMessage on ")
            && stderr.contains(&format!("`schedkit-{}-operator`", stack.name)),
        "{stderr}"
    );

    // …and no action: AWS refuses the first write (the audit trail's entry), so nothing
    // changes, and the console names the permission and the policy that grants it.
    let operator_policy = format!("`schedkit-{}-operator`", stack.name);
    for action in [
        &["jobs", "pause", "long-report", "--reason", "a viewer tries"][..],
        &["dlq", "purge", "--yes"],
        &["dlq", "redrive", "--yes"],
        &["fire", "long-report"],
        &["executions", "cancel", "roles-now", "--yes"],
    ] {
        let out = viewer.run(action);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{action:?}: {stderr}");
        assert!(
            stderr.contains("AWS refused dynamodb:PutItem on ")
                && stderr.contains(&operator_policy),
            "{action:?}: {stderr}"
        );
    }
    assert_eq!(
        schedule_state(&stack, "long-report").await,
        ScheduleState::Enabled
    );
    assert_eq!(
        stack.counts(&stack.dlq_url).await.unwrap().0,
        1,
        "the letter stays, visible"
    );
    // Who acts is the AWS identity, or nothing is done: STS out of reach is no way to act
    // under another name.
    let out = operator.run_with_sts_at(
        &[
            "jobs",
            "pause",
            "long-report",
            "--reason",
            "as someone else",
        ],
        "http://127.0.0.1:9",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("who acts is not known"), "{stderr}");
    assert_eq!(
        schedule_state(&stack, "long-report").await,
        ScheduleState::Enabled
    );
    // A table that is not the stage's is refused too, and the refusal says on what.
    let out = operator.run(&["--table", "someone-elses", "executions", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("AWS refused dynamodb:Query on arn:aws:dynamodb:us-east-1:000000000000:table/someone-elses/index/by-shard"),
        "{stderr}"
    );

    // Through a role's session, as people working through SSO act: the same policies hold,
    // and the trail names the session.
    let oncall = Console::signed(&stack, session(&stack, Role::Operator, "oncall").await);
    oncall.ok(&["jobs", "pause", "long-report", "--reason", "on call"]);
    oncall.ok(&["jobs", "resume", "long-report"]);
    let watcher = Console::signed(&stack, session(&stack, Role::Viewer, "watcher").await);
    watcher.ok(&["status"]);
    let out = watcher.run(&["jobs", "pause", "long-report", "--reason", "watching"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("AWS refused dynamodb:PutItem on ") && stderr.contains(&operator_policy),
        "{stderr}"
    );
    let by_oncall: serde_json::Value = serde_json::from_str(&viewer.ok(&[
        "--output", "json", "audit", "--by", "tester", "--action", "jobs",
    ]))
    .unwrap();
    let by_oncall = by_oncall.as_array().unwrap();
    assert_eq!(
        by_oncall.len(),
        4,
        "pause and resume, begun and ended: {by_oncall:?}"
    );
    assert!(
        by_oncall.iter().all(|e| e["who"]
            .as_str()
            .unwrap()
            .ends_with(&format!("assumed-role/{}-oncall/tester", stack.name))),
        "{by_oncall:?}"
    );

    // What each used is what its policy grants (but chains' actions, used by the chains
    // test): no grant the console does not need.
    assert_eq!(used(&viewer).await, granted(Role::Viewer));
    assert_eq!(used(&operator).await, granted(Role::Operator));
}
