//! The audit trail of actions that fail half-way: each action is written when it begins and
//! when it ends, the end saying what was done before the failure.

use schedkit::{ExecutionRecord, Status};
use schedkit_testkit::{Stack, StackOptions, localstack, unique};
use serde_json::Value;

use super::cli::{schedkit, stderr};

/// The audit lines of `what` whose details mention `mark`, in order.
fn audited(what: &str, mark: &str) -> Vec<Value> {
    let path = std::env::temp_dir().join("schedkit-cli-test-audit.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["what"] == what && v["details"].to_string().contains(mark))
        .collect()
}

/// The audit trail holds a begin and an end line for the action, the end saying it did not
/// finish and containing `done` (what it did before that).
fn assert_audited_half_way(lines: &[Value], done: &str) {
    assert_eq!(lines.len(), 2, "a begin and an end line: {lines:#?}");
    assert_eq!(lines[0]["phase"], "begin", "{lines:#?}");
    assert_eq!(lines[1]["phase"], "end", "{lines:#?}");
    assert_eq!(lines[1]["finished"], false, "{lines:#?}");
    assert_eq!(lines[0]["id"], lines[1]["id"], "{lines:#?}");
    let end = lines[1].to_string();
    assert!(
        end.contains(done),
        "the end line does not say `{done}`: {end}"
    );
}

/// `jobs pause` on a stage whose schedules were never synced: the pause is recorded, the
/// schedule cannot be disabled (there is none). The trail says so. (Nothing was audited: the
/// line was written only after a success.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_whose_schedule_is_missing_is_audited_with_what_it_recorded() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("audit-pause"), StackOptions::default())
        .await
        .unwrap();
    let out = schedkit(&[
        "--stage",
        &stack.name,
        "jobs",
        "pause",
        "long-report",
        "--reason",
        "audit half-way",
    ]);
    assert!(
        !out.status.success(),
        "the pause succeeded without a schedule"
    );
    assert!(stderr(&out).contains("no schedule"), "{}", stderr(&out));
    let lines = audited("jobs pause", &stack.schedule_group);
    assert_audited_half_way(&lines, "recorded");
    // The stage's own trail says the same (the file is its copy).
    let out = schedkit(&[
        "--stage",
        &stack.name,
        "audit",
        "--action",
        "jobs pause",
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut staged: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    staged.reverse(); // listed newest first
    assert_audited_half_way(&staged, "recorded");

    // An item of the trail this version cannot read is listed as such, with its text; the
    // rest of the listing stands (one bad item failed every listing before).
    use aws_sdk_dynamodb::types::AttributeValue::S;
    let when = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    stack
        .ddb
        .put_item()
        .table_name(&stack.table)
        .item("execution_key", S(".schedkit/audit/garbled/begin".into()))
        .item("list_shard", S("audit".into()))
        .item("updated_at", S(when))
        .item("entry", S("{not json".into()))
        .send()
        .await
        .unwrap();
    let out = schedkit(&["--stage", &stack.name, "audit", "--output", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        listed.iter().any(|e| e["what"] == "jobs pause"),
        "{listed:#?}"
    );
    let garbled = listed
        .iter()
        .find(|e| e["what"] == "(an entry this version cannot read)")
        .unwrap_or_else(|| panic!("{listed:#?}"));
    assert_eq!(garbled["details"]["entry"], "{not json", "{garbled}");
}

/// `chains rerun` of a paused run whose first execution is gone: the rerun records run 2
/// RUNNING, then cannot start its execution. The trail says it recorded the run. (Nothing
/// was audited.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_that_could_not_start_its_execution_is_audited_with_what_it_recorded() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("audit-rerun"), StackOptions::default())
        .await
        .unwrap();
    let key = unique("month-end#2026-11-30T06:00:00Z");
    let now = "2026-12-01T06:00:00.000Z".to_string();
    let paused = ExecutionRecord {
        execution_key: key.clone(),
        job: "month-end".into(),
        scheduled_for: "2026-11-30T06:00:00Z".into(),
        status: Status::Paused,
        attempt: 1,
        attempt_base: 0,
        owner: Some(schedkit::key::chain_execution_name(&key, 1)),
        lease_expires_at: None,
        payload_hash: "h".into(),
        input: Some("{}".into()),
        created_at: now.clone(),
        updated_at: now.clone(),
        started_at: Some(now.clone()),
        finished_at: Some(now),
        duration_ms: None,
        last_error: Some("step `orders-export` failed: schedkit.permanent-error: blocked".into()),
        history: Vec::new(),
        result: None,
        message_id: None,
        cancelled: None,
        skipped: None,
        late_attempt: None,
        waiting_since: None,
        expires_at: chrono::Utc::now().timestamp() + 3600,
    };
    stack.put_record(&paused).await.unwrap();
    let out = schedkit(&["--stage", &stack.name, "chains", "rerun", &key, "--yes"]);
    assert!(
        !out.status.success(),
        "the rerun succeeded without its first execution"
    );
    let lines = audited("chains rerun", &key);
    assert_audited_half_way(&lines, "run 2");
}

/// `schedkit audit` lists the newest entries first, and a limit keeps the newest: past the
/// limit in a week, the oldest are left out, never the newest (they were, when the trail
/// was read oldest first and cut at the limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trail_lists_the_newest_first_and_a_limit_keeps_the_newest() {
    use aws_sdk_dynamodb::types::AttributeValue::S;
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("audit-order"), StackOptions::default())
        .await
        .unwrap();
    let start = chrono::Utc::now() - chrono::Duration::hours(1);
    for i in 0..12 {
        let when = (start + chrono::Duration::minutes(i))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let entry = serde_json::json!({
            "id": format!("order-{i:02}"), "when": when, "who": "arn:aws:iam::1:user/alice",
            "what": "fire", "details": {"n": i}, "phase": "begin",
        });
        stack
            .ddb
            .put_item()
            .table_name(&stack.table)
            .item(
                "execution_key",
                S(format!(".schedkit/audit/order-{i:02}/begin")),
            )
            .item("list_shard", S("audit".into()))
            .item("updated_at", S(when))
            .item("entry", S(entry.to_string()))
            .send()
            .await
            .unwrap();
    }
    let out = schedkit(&[
        "--stage",
        &stack.name,
        "audit",
        "--limit",
        "5",
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = listed.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        ["order-11", "order-10", "order-09", "order-08", "order-07"],
        "the five newest, newest first"
    );
}
