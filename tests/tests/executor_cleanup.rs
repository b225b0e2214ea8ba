//! Stopping LocalStack ends every process its Lambda executor started and removes the
//! functions' unpacked code. This test starts a LocalStack of its own (on a free port) with
//! the project's launcher, so that it can stop it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use aws_config::Region;
use aws_sdk_lambda::config::Credentials;
use schedkit_testkit::lambda::{FunctionSpec, create_function, invoke};
use schedkit_testkit::{PrivateLocalStack, unique};
use serde_json::json;

/// Processes (pid, command) whose process group is `pgid`.
fn members(pgid: i64) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((name, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let group: i64 = rest
            .split_whitespace()
            .nth(2)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let state = rest.split_whitespace().next().unwrap_or("");
        if group == pgid && state != "Z" {
            out.push((
                pid,
                name.split_once('(').map(|x| x.1).unwrap_or("").to_string(),
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_localstack_stops_no_executor_process_or_unpacked_code_is_left() {
    let localstack = PrivateLocalStack::start();
    let sdk = schedkit::aws::config_loader()
        .endpoint_url(localstack.endpoint())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .load()
        .await;
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let spec = FunctionSpec::new(&unique("probe-orphans"), "probe");
    create_function(&lambda, &spec).await.unwrap();
    let payload = json!({"whoami": true, "sleep_ms": 500});
    let answers =
        futures::future::join_all((0..2).map(|_| invoke(&lambda, &spec.name, &payload))).await;
    let answers: Vec<_> = answers.into_iter().map(|a| a.unwrap().payload).collect();
    let groups: BTreeSet<i64> = answers
        .iter()
        .map(|a| a["pgid"].as_i64().unwrap())
        .collect();
    // The code is unpacked into this instance's own temporary folder, not the shared /tmp.
    let instance_tmp = localstack.tmp_dir().canonicalize().unwrap();
    let task_root = PathBuf::from(answers[0]["task_root"].as_str().unwrap());
    assert!(
        task_root.starts_with(&instance_tmp) && task_root.join("bootstrap").exists(),
        "{} is not inside {}",
        task_root.display(),
        instance_tmp.display()
    );
    assert_eq!(groups.len(), 2);
    for g in &groups {
        let procs = members(*g);
        assert!(
            procs
                .iter()
                .any(|(_, name)| name.starts_with("schedkit-lambda")),
            "{procs:?}"
        );
        assert!(
            procs.iter().any(|(_, name)| name == "bootstrap"),
            "{procs:?}"
        );
    }

    let stopped = localstack.launcher("stop");
    assert!(
        stopped.status.success(),
        "{}",
        String::from_utf8_lossy(&stopped.stderr)
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<_> = groups.iter().flat_map(|g| members(*g)).collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left running after stop: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!instance_tmp.exists(), "{} is left", instance_tmp.display());
}
