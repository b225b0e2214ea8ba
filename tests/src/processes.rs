//! The workspace's binaries run against a stage as its users run them: a worker process
//! polling the stage's queue, and the console answering in JSON.

use std::path::Path;

use tokio::process::Child;

use crate::stack::Stack;

/// A worker process polling `stack`'s queue with the catalog `catalog`, killed when dropped;
/// its log at `target/<area>/<stage>-<name>.log`.
pub fn worker(stack: &Stack, catalog: &Path, area: &str, name: &str) -> Child {
    worker_with(stack, catalog, area, name, &[])
}

/// [`worker`] with more environment (`env`: an OTLP endpoint, say).
pub fn worker_with(
    stack: &Stack,
    catalog: &Path,
    area: &str,
    name: &str,
    env: &[(String, String)],
) -> Child {
    let logs = crate::target_dir().join(area);
    std::fs::create_dir_all(&logs).unwrap();
    let log = std::fs::File::create(logs.join(format!("{}-{name}.log", stack.name))).unwrap();
    tokio::process::Command::new(crate::binary("worker"))
        .args(["--wait-seconds", "1"])
        .envs(stack.worker_env())
        .env("SCHEDKIT_CATALOG", catalog)
        .envs(env.iter().cloned())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("the worker binary starts (cargo build --bins)")
}

/// The console's JSON answer to `args` on `stack` with the catalog `catalog` (its audit
/// trail's file copy in the temporary folder), asserting it succeeds.
pub fn console_json(stack: &Stack, catalog: &Path, args: &[&str]) -> serde_json::Value {
    console_json_with(stack, catalog, args, &[])
}

/// [`console_json`] with more environment.
pub fn console_json_with(
    stack: &Stack,
    catalog: &Path,
    args: &[&str],
    env: &[(String, String)],
) -> serde_json::Value {
    let audit = std::env::temp_dir().join(format!("{}-audit.jsonl", stack.name));
    let out = std::process::Command::new(crate::binary("schedkit"))
        .args(args)
        .args(["--output", "json"])
        .envs(stack.worker_env())
        .env("SCHEDKIT_CATALOG", catalog)
        .env("SCHEDKIT_AUDIT_LOG", audit)
        .envs(env.iter().cloned())
        .output()
        .expect("the console runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// One check of the accountant through the worker binary (`--account --account-commit`,
/// from `since` when given), as the stage's schedule runs it: the EMF lines it printed,
/// and its check.
pub fn account(
    stack: &Stack,
    catalog: &Path,
    since: Option<&str>,
) -> (Vec<serde_json::Value>, serde_json::Value) {
    let mut command = std::process::Command::new(crate::binary("worker"));
    command.args(["--account", "--account-commit"]);
    if let Some(since) = since {
        command.args(["--account-since", since]);
    }
    let out = command
        .envs(stack.worker_env())
        .env("SCHEDKIT_CATALOG", catalog)
        .output()
        .expect("the worker binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "worker --account: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let check = lines
        .iter()
        .rfind(|l| l.get("reported").is_some())
        .cloned()
        .unwrap_or_else(|| panic!("no check printed: {stdout}"));
    let metrics = lines
        .into_iter()
        .filter(|l| l.get("_aws").is_some())
        .collect();
    (metrics, check)
}

/// The sum of `metric` over EMF lines, per `Job` (a stage's own lines under `-`).
pub fn metric_by_job(
    lines: &[serde_json::Value],
    metric: &str,
) -> std::collections::BTreeMap<String, f64> {
    let mut sums = std::collections::BTreeMap::new();
    for l in lines {
        if let Some(v) = l.get(metric).and_then(serde_json::Value::as_f64) {
            let job = l.get("Job").and_then(|j| j.as_str()).unwrap_or("-");
            *sums.entry(job.to_string()).or_insert(0.0) += v;
        }
    }
    sums
}
