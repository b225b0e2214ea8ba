//! The artifact users deploy to AWS is the one proven: the `bootstrap` that `sam build`
//! produced (`infra/sam-build.sh`: x86_64, cargo-lambda; `make test` runs it after the
//! build, beside the tests, at the idle scheduling class, in the debug profile to halve its time,
//! where `make sam-build` builds release) is zipped as `sam deploy` uploads it, deployed
//! with `infra/template.yaml` to LocalStack, and runs a job to DONE through LocalStack's
//! SQS event source.

use std::io::Write;
use std::time::Duration;

use schedkit::{Envelope, Status};
use schedkit_testkit::{Stack, StackOptions, WorkerBuild, localstack, root, target_dir, unique};
use serde_json::json;

/// Under `make test`, `sam build` runs beside the tests at the lowest priority, and writes
/// its exit status to the file `SCHEDKIT_SAM_BUILD_STATUS` names when it ends: waits for it
/// (at most half an hour), and fails with the build's log if it failed.
async fn wait_for_sam_build() {
    let Some(status) = std::env::var_os("SCHEDKIT_SAM_BUILD_STATUS") else {
        return;
    };
    let status = std::path::PathBuf::from(status);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30 * 60);
    let code = loop {
        if let Ok(text) = std::fs::read_to_string(&status)
            && !text.trim().is_empty()
        {
            break text.trim().to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "sam build wrote no status to {} in half an hour",
            status.display()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let log = status.with_file_name("sam-build.log");
    assert_eq!(
        code,
        "0",
        "sam build failed; its log ({}):\n{}",
        log.display(),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bootstrap_sam_build_produced_runs_a_job_to_done_on_localstack() {
    wait_for_sam_build().await;
    let built = target_dir().join("sam");
    let bootstrap = built.join("WorkerFunction/bootstrap");
    assert!(
        bootstrap.exists() && built.join("template.yaml").exists(),
        "{} is missing: run infra/sam-build.sh (`make test` does)",
        bootstrap.display()
    );
    let zip = std::env::temp_dir().join(format!("{}.zip", unique("sam-worker")));
    let mut z = zip::ZipWriter::new(std::fs::File::create(&zip).unwrap());
    let options = zip::write::SimpleFileOptions::default().unix_permissions(0o755);
    z.start_file("bootstrap", options).unwrap();
    z.write_all(&std::fs::read(&bootstrap).unwrap()).unwrap();
    z.finish().unwrap();

    let sdk = localstack().await;
    let stack = Stack::create(
        &sdk,
        &unique("sam"),
        StackOptions {
            worker_event_source: true,
            worker: Some(WorkerBuild {
                template: root().join("infra/template.yaml"),
                zip: zip.clone(),
            }),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    // Deployed: the zip (tens of MB in the debug profile) is not left in the temp folder.
    std::fs::remove_file(&zip).ok();
    let mut invoice = Envelope::new("record-invoice", "2026-12-01T02:00:00Z".parse().unwrap());
    invoice.payload = json!({"tenant": "sam", "billing_month": "2026-11", "amount_cents": 7})
        .as_object()
        .cloned();
    stack.send_envelope(&invoice).await.unwrap();

    let key = "invoice:2026-11:sam";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match stack.record(key).await.unwrap() {
            Some(r) if r.status == Status::Done => break,
            other => assert!(
                tokio::time::Instant::now() < deadline,
                "not DONE after a minute: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(stack.effect_applied(key).await.unwrap(), 1);
}
