//! A team's crate outside this workspace, taken to a deployed stage by the book's own
//! commands: the shell block of "From a crate to a stage" is read from the book's
//! "Writing jobs" chapter (docs/book/src/writing-jobs.md) and run
//! as it is, in a temporary directory, with only what the chapter asks to be set
//! (`SCHEDKIT_HOME`, `STAGE`, the LocalStack endpoint and credentials). It copies the
//! starter, makes `schedkit` a path dependency, writes its template, deploys it (the deploy
//! builds and packages the crate), fires one run of each job and runs the starter's unit
//! tests. Then every job is DONE through the stage's own worker Lambda, the signup written
//! once, and a second delivery of the same signup is a duplicate that rewrites nothing.

use std::path::Path;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use schedkit::{ExecutionRecord, Status};
use schedkit_testkit::{localstack, root, unique};

/// The chapter whose commands this test runs.
const CHAPTER: &str = "docs/book/src/writing-jobs.md";

/// The first `sh` block after `heading` in [`CHAPTER`].
fn chapter_block(heading: &str) -> String {
    let chapter = std::fs::read_to_string(root().join(CHAPTER)).unwrap();
    let section = chapter
        .split_once(heading)
        .unwrap_or_else(|| panic!("{CHAPTER} has no `{heading}`"))
        .1;
    let block = section
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .unwrap_or_else(|| panic!("no sh block under `{heading}`"))
        .0;
    block.to_string()
}

/// The environment the chapter asks for, and nothing of `cargo test`'s own (its target
/// directory, the clippy wrapper `make test` sets): what a user's shell has.
fn users_shell(dir: &Path, home: &Path, stage: &str) -> tokio::process::Command {
    let mut shell = tokio::process::Command::new("bash");
    shell.current_dir(dir).env_clear();
    for name in [
        "PATH",
        "HOME",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "TMPDIR",
        "LANG",
    ] {
        if let Some(value) = std::env::var_os(name) {
            shell.env(name, value);
        }
    }
    shell
        .env("SCHEDKIT_HOME", home)
        .env("STAGE", stage)
        .env("AWS_ENDPOINT_URL", schedkit_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1");
    shell
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crate_outside_the_workspace_deploys_by_the_books_commands_and_runs_each_job_to_done() {
    let sdk = localstack().await;
    let home = root().canonicalize().unwrap();
    assert!(
        home.join("target/debug/schedkit").exists(),
        "the book runs $SCHEDKIT_HOME/target/debug/schedkit: build this checkout with `make build` (not with CARGO_TARGET_DIR elsewhere)"
    );
    let dir = std::env::temp_dir().join(unique("my-crate"));
    std::fs::create_dir_all(&dir).unwrap();
    let stage = unique("mine");
    let block = chapter_block("### From a crate to a stage");
    let out = users_shell(&dir, &home, &stage)
        .args(["-euo", "pipefail", "-c", &block])
        .output()
        .await
        .expect("bash runs");
    let said = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the book's commands failed\n{said}");
    assert!(
        said.contains("tests::a_duplicate_delivery_records_the_signup_once ... ok"),
        "the starter's unit tests ran\n{said}"
    );
    // In the checkout's build directory (the chapter's CARGO_BUILD_BUILD_DIR), the crate
    // compiles its own code and the library, and reuses every dependency the checkout's
    // build compiled: the same features (schedkit-unified-features) and the same profile.
    let compiled: Vec<&str> = said
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("Compiling "))
        .map(|l| l.split(' ').next().unwrap_or(l))
        .collect();
    let own = ["schedkit-unified-features", "schedkit", "starter"];
    assert!(
        compiled.iter().all(|c| own.contains(c)),
        "the crate compiled dependencies the checkout had built: {:?} \
         (a dependency's features widened? run unified-features/update.py)\n{said}",
        compiled
            .iter()
            .filter(|c| !own.contains(c))
            .collect::<Vec<_>>()
    );
    let crate_dir = dir.join("my-jobs");
    assert!(
        !crate_dir.starts_with(&home),
        "the crate is outside the checkout"
    );

    let ddb = aws_sdk_dynamodb::Client::new(&sdk);
    let table = format!("schedkit-{stage}-executions");
    let effects = format!("schedkit-{stage}-effects");
    let records = wait_for_done(&ddb, &table, 2).await;
    let greet = records.iter().find(|r| r.job == "greet").unwrap();
    let result: serde_json::Value = serde_json::from_str(greet.result.as_deref().unwrap()).unwrap();
    assert_eq!(result, serde_json::json!({"greeting": "Hello, Ada!"}));

    // The same signup again: the same key, acknowledged as a duplicate, nothing rewritten.
    let first = effect(&ddb, &effects, "signup:ada@example.com")
        .await
        .expect("the signup is written");
    let again = users_shell(&crate_dir, &home, &stage)
        .args(["-c", r#""$SCHEDKIT_HOME/target/debug/schedkit" --catalog catalog.toml --stage "$STAGE" fire record-signup --payload '{"email": "ada@example.com", "plan": "team"}'"#])
        .output()
        .await
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(wait_for_done(&ddb, &table, 2).await.len(), 2);
    assert_eq!(
        effect(&ddb, &effects, "signup:ada@example.com").await,
        Some(first)
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The stage's records once `n` of them are DONE (at most a minute).
async fn wait_for_done(
    ddb: &aws_sdk_dynamodb::Client,
    table: &str,
    n: usize,
) -> Vec<ExecutionRecord> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let items = ddb
            .scan()
            .table_name(table)
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .items
            .unwrap_or_default();
        // A job's overlap slot, pause and failure streak have no status: not records.
        let items: Vec<_> = items
            .into_iter()
            .filter(|i| i.contains_key("status"))
            .collect();
        let records: Vec<ExecutionRecord> = serde_dynamo::from_items(items).unwrap();
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
async fn effect(ddb: &aws_sdk_dynamodb::Client, table: &str, key: &str) -> Option<String> {
    let item = ddb
        .get_item()
        .table_name(table)
        .key("effect_key", AttributeValue::S(key.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item?;
    item.get("recorded_at").and_then(|v| v.as_s().ok()).cloned()
}
