//! The workspace's binaries run against a stage as its users run them: a worker process
//! polling the stage's queue, and the console answering in JSON.

use std::path::Path;

use tokio::process::Child;

use crate::stack::Stack;

/// A worker process polling `stack`'s queue with the catalog `catalog`, killed when dropped;
/// its log at `target/<area>/<stage>-<name>.log`.
pub fn worker(stack: &Stack, catalog: &Path, area: &str, name: &str) -> Child {
    let logs = crate::target_dir().join(area);
    std::fs::create_dir_all(&logs).unwrap();
    let log = std::fs::File::create(logs.join(format!("{}-{name}.log", stack.name))).unwrap();
    tokio::process::Command::new(crate::binary("worker"))
        .args(["--wait-seconds", "1"])
        .envs(stack.worker_env())
        .env("SCHEDKIT_CATALOG", catalog)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("the worker binary starts (cargo build --bins)")
}

/// The console's JSON answer to `args` on `stack` with the catalog `catalog` (its audit
/// trail's file copy in the temporary folder), asserting it succeeds.
pub fn console_json(stack: &Stack, catalog: &Path, args: &[&str]) -> serde_json::Value {
    let audit = std::env::temp_dir().join(format!("{}-audit.jsonl", stack.name));
    let out = std::process::Command::new(crate::binary("schedkit"))
        .args(args)
        .args(["--output", "json"])
        .envs(stack.worker_env())
        .env("SCHEDKIT_CATALOG", catalog)
        .env("SCHEDKIT_AUDIT_LOG", audit)
        .output()
        .expect("the console runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}
