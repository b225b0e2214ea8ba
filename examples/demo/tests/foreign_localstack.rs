//! The path of a user whose LocalStack this checkout did not start (Docker, or a second
//! checkout): a LocalStack started by the launcher of another folder, on another port; a
//! checkout with no `localstack/.cache` (and no `infra/.cache`, no `target/`) whose launcher
//! reuses it, whose deploy brings its own Python environment, and whose demo ends with every
//! execution DONE. And a LocalStack that cannot run schedkit's Lambdas (no Docker, no
//! schedkit executor) is refused by the first command, in one line that says what to do.

use std::path::{Path, PathBuf};
use std::process::Command;

use schedkit_testkit::{PrivateLocalStack, root, unique};

/// The files of this checkout that git tracks (or would: new, not ignored), copied as a
/// fresh clone would have them.
fn fresh_checkout(to: &Path) {
    let listed = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root())
        .output()
        .expect("git runs");
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    for file in listed.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let file = PathBuf::from(String::from_utf8(file.to_vec()).unwrap());
        let (from, into) = (root().join(&file), to.join(&file));
        if !from.exists() {
            continue; // deleted in the working tree, not yet committed
        }
        std::fs::create_dir_all(into.parent().unwrap()).unwrap();
        std::fs::copy(&from, &into).unwrap();
    }
}

#[test]
fn the_demo_runs_from_a_fresh_checkout_against_a_localstack_another_launcher_started() {
    let _alone = super::one_demo_at_a_time();
    let localstack = PrivateLocalStack::start();
    let checkout = std::env::temp_dir().join(unique("fresh-checkout"));
    fresh_checkout(&checkout);
    assert!(!checkout.join("localstack/.cache").exists());

    let reuse = Command::new(checkout.join("localstack/launch.sh"))
        .arg("start")
        .env("LOCALSTACK_PORT", localstack.port.to_string())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&reuse.stderr);
    assert!(
        reuse.status.success() && said.contains("(reused)"),
        "{said}"
    );

    let log_dir = checkout.join("target/demo");
    let demo = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--name", &unique("foreign"), "--log-dir"])
        .arg(&log_dir)
        .current_dir(&checkout)
        .env("SCHEDKIT_ROOT", &checkout)
        .env("LOCALSTACK_PORT", localstack.port.to_string())
        .env("AWS_ENDPOINT_URL", localstack.endpoint())
        .output()
        .expect("demo starts");
    let text = String::from_utf8_lossy(&demo.stdout);
    assert!(
        demo.status.success(),
        "demo failed:\n{text}\n{}",
        String::from_utf8_lossy(&demo.stderr)
    );
    assert!(
        text.contains("every execution is DONE (23 records"),
        "{text}"
    );
    // Nothing of LocalStack was installed into the checkout; the deploy used its own boto3.
    assert!(!checkout.join("localstack/.cache").exists());
    assert!(
        checkout
            .join("infra/.cache/deploy-venv/bin/python")
            .exists()
    );
    std::fs::remove_dir_all(&checkout).ok();
}

#[test]
fn a_localstack_that_cannot_run_schedkits_lambdas_is_refused_in_one_line_with_the_fix() {
    // Stock LocalStack's own executor, on a machine without Docker.
    let localstack = PrivateLocalStack::start_with_executor("docker");
    let checkout = std::env::temp_dir().join(unique("fresh-checkout"));
    fresh_checkout(&checkout);
    let start = Command::new(checkout.join("localstack/launch.sh"))
        .arg("start")
        .env("LOCALSTACK_PORT", localstack.port.to_string())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&start.stderr);
    assert!(!start.status.success(), "{said}");
    assert_eq!(
        said,
        format!(
            "localstack: error: the LocalStack on 127.0.0.1:{} runs without Docker and without schedkit's Lambda executor, so schedkit's functions cannot run in it: stop it and run localstack/launch.sh start (or start it with Docker: docker compose -f localstack/docker-compose.yml up -d)\n",
            localstack.port
        )
    );
    assert!(!checkout.join("localstack/.cache").exists());
    std::fs::remove_dir_all(&checkout).ok();
}
