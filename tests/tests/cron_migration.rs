//! A team leaving cron: its crontab imported (`schedkit catalog import`), the catalog's
//! command jobs run by a polling worker on LocalStack: two to DONE, their output on the
//! record; a failing one to the DLQ with its exit code and its output's tail.

use std::time::Duration;

use schedkit::Envelope;
use schedkit::Status;
use schedkit::dead_letter::attr;
use schedkit_testkit::{Stack, StackOptions, localstack, processes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_cron_jobs_run_as_commands_on_a_polling_worker_and_a_failure_is_dead_lettered() {
    localstack().await;
    let stack = Stack::lane("cron-import", StackOptions::default()).await;
    let dir = std::env::temp_dir().join(format!("schedkit-cron-{}", stack.name));
    std::fs::create_dir_all(&dir).unwrap();
    let crontab = dir.join("crontab");
    let marker = dir.join("cleaned");
    std::fs::write(
        &crontab,
        format!(
            "GREETING=hello\n\
             0 2 * * * echo \"$GREETING from $SCHEDKIT_KEY\"\n\
             30 3 * * sun touch {} && echo cleaned\n\
             */10 * * * * /bin/sh -c 'echo checking disk; echo disk full >&2; exit 4'\n",
            marker.display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(schedkit_testkit::binary("schedkit"))
        .args(["catalog", "import"])
        .arg(&crontab)
        .args(["--owner", "ops", "--timezone", "UTC"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // As cron ran them: once each, the failing check not retried.
    let catalog_text = String::from_utf8(out.stdout).unwrap();
    let catalog = dir.join("catalog.toml");
    std::fs::write(&catalog, &catalog_text).unwrap();
    let names: Vec<&str> = catalog_text
        .lines()
        .filter_map(|l| l.strip_prefix("[jobs.")?.strip_suffix(']'))
        .filter(|name| !name.ends_with(".command"))
        .collect();
    // Named after the program each line runs (`sh -c 'echo ...'` runs echo).
    assert_eq!(names, ["echo", "touch", "echo-2"], "{catalog_text}");

    let at = "2026-12-06T02:00:00Z".parse().unwrap();
    for job in &names {
        stack
            .send_envelope(&Envelope::new(*job, at).with_key(format!("{job}:1")))
            .await
            .unwrap();
    }
    let _worker = processes::worker(&stack, &catalog, "cron-migration", "poller");
    let mut records = Vec::new();
    for _ in 0..120 {
        records.clear();
        for job in &names {
            records.push(stack.record(&format!("{job}:1")).await.unwrap());
        }
        let ended = records.iter().all(|r| {
            r.as_ref()
                .is_some_and(|r| matches!(r.status, Status::Done | Status::Failed))
        });
        if ended {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let [echo, touch, sh] = &records[..] else {
        unreachable!()
    };
    let (echo, touch, sh) = (
        echo.as_ref().unwrap(),
        touch.as_ref().unwrap(),
        sh.as_ref().unwrap(),
    );
    assert_eq!(echo.status, Status::Done, "{echo:?}");
    assert!(
        echo.result
            .as_deref()
            .unwrap()
            .contains("hello from echo:1"),
        "{echo:?}"
    );
    assert_eq!(touch.status, Status::Done, "{touch:?}");
    assert!(marker.exists(), "the command ran on the worker's host");
    assert_eq!(sh.status, Status::Failed, "{sh:?}");
    let letters = stack.drain_dlq(Duration::from_secs(10)).await.unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let error = letters[0].message_attributes.as_ref().unwrap()[attr::ERROR]
        .string_value
        .clone()
        .unwrap();
    assert!(error.starts_with("exited with code 4; output: "), "{error}");
    // Its stdout and stderr, each line as it came (the two streams' order is the OS's).
    assert!(
        error.contains("checking disk") && error.contains("disk full"),
        "{error}"
    );
}
