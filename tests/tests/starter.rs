//! The example a team copies (`examples/starter`) goes the README's way, "Run your own
//! jobs": `schedkit iac init` writes its template, the LocalStack deploy builds a stage of
//! it with the starter's own bootstrap, `schedkit fire` sends one run of each of its two
//! jobs, and the deployed Lambda (LocalStack's event source, schedkit's executor) runs both
//! to DONE; the side effect is written once, and a second delivery of the same signup is
//! taken off the queue as a duplicate without running again.

use std::path::PathBuf;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use schedkit::Status;
use schedkit_testkit::{Stack, StackOptions, WorkerBuild, binary, localstack, unique};

fn starter(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/starter")
        .join(file)
}

/// `schedkit ARGS` with the starter's catalog, against the stage; its stdout.
fn schedkit(stack: &Stack, args: &[&str]) -> String {
    let out = std::process::Command::new(binary("schedkit"))
        .arg("--catalog")
        .arg(starter("catalog.toml"))
        .args(["--stage", &stack.name])
        .args(args)
        .envs(stack.worker_env())
        .env(
            "SCHEDKIT_AUDIT_LOG",
            std::env::temp_dir().join(format!("{}.audit", stack.name)),
        )
        .output()
        .expect("schedkit starts");
    assert!(
        out.status.success(),
        "schedkit {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_starter_crate_deploys_and_runs_each_of_its_jobs_to_done() {
    let sdk = localstack().await;
    let dir = std::env::temp_dir().join(unique("starter"));
    let template = dir.join("template.yaml");
    let init = std::process::Command::new(binary("schedkit"))
        .arg("--catalog")
        .arg(starter("catalog.toml"))
        .args(["iac", "init", "--binary", "starter", "--template"])
        .arg(&template)
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let text = std::fs::read_to_string(&template).unwrap();
    // The starter's alarms are its own jobs'; its schedules are sync's, not the template's.
    assert!(text.contains("Binary: starter") && text.contains("{ Name: Job, Value: \"greet\" }"));

    let stack = Stack::create(
        &sdk,
        &unique("starter"),
        StackOptions {
            worker_event_source: true,
            worker: Some(WorkerBuild {
                template,
                zip: schedkit_testkit::target_dir().join("lambda/debug/starter.zip"),
            }),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();

    schedkit(&stack, &["fire", "greet", "--payload", r#"{"name":"Ada"}"#]);
    let signup = r#"{"email":"ada@example.com","plan":"team"}"#;
    schedkit(&stack, &["fire", "record-signup", "--payload", signup]);
    let records = wait_for_done(&stack, 2).await;
    let greet = records.iter().find(|r| r.job == "greet").unwrap();
    let result: serde_json::Value = serde_json::from_str(greet.result.as_deref().unwrap()).unwrap();
    assert_eq!(result, serde_json::json!({"greeting": "Hello, Ada!"}));

    // The same signup again: the same key, acknowledged as a duplicate, nothing rewritten.
    let first = effect(&stack, "signup:ada@example.com")
        .await
        .expect("the signup is written");
    schedkit(&stack, &["fire", "record-signup", "--payload", signup]);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(wait_for_done(&stack, 2).await.len(), 2);
    assert_eq!(effect(&stack, "signup:ada@example.com").await, Some(first));
}

/// The stage's records once `n` of them are DONE (at most a minute).
async fn wait_for_done(stack: &Stack, n: usize) -> Vec<schedkit::ExecutionRecord> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let records = stack.records().await.unwrap();
        if records.iter().filter(|r| r.status == Status::Done).count() >= n {
            return records;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not {n} DONE records after a minute: {records:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The `recorded_at` of the effects-table item of `key`, if it exists.
async fn effect(stack: &Stack, key: &str) -> Option<String> {
    let item = stack
        .ddb
        .get_item()
        .table_name(&stack.effects_table)
        .key("effect_key", AttributeValue::S(key.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item?;
    item.get("recorded_at").and_then(|v| v.as_s().ok()).cloned()
}
