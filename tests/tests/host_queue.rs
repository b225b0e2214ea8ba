//! Host jobs on the stage's own queue: a deployed stage's host jobs (`runs_on = "host"`)
//! are scheduled to, fired into and redriven back to its host jobs queue, never the jobs
//! queue the function reads; a polling worker on that queue runs them, and a failure's
//! dead letter goes back there.

use std::time::Duration;

use schedkit::Status;
use schedkit::dead_letter::attr;
use schedkit_testkit::{Stack, StackOptions, localstack, processes, unique};

const CATALOG: &str = r#"
[jobs.nightly-etl]
owner = "data"
runs_on = "host"
command = { run = "echo etl run $SCHEDKIT_KEY" }
schedule = { expression = "rate(1 hour)", enabled = false }

[jobs.broken-etl]
owner = "data"
runs_on = "host"
retry = { max_attempts = 1 }
command = { run = "echo no source; exit 3", permanent_exit_codes = [3] }

[jobs.quick-sync]
owner = "data"
handler = "flaky-sync"
payload = { fail_times = 0 }
schedule = { expression = "rate(1 hour)", enabled = false }
"#;

/// Messages a queue holds: visible, in flight or delayed.
async fn held(stack: &Stack, url: &str) -> u64 {
    let (visible, in_flight, delayed) = stack.counts(url).await.unwrap();
    visible + in_flight + delayed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_jobs_are_scheduled_fired_and_redriven_to_the_host_queue_and_run_by_its_poller() {
    let sdk = localstack().await;
    let options = StackOptions {
        worker_event_source: false,
        ..StackOptions::default()
    };
    let stack = Stack::create(&sdk, &unique("hostq"), options)
        .await
        .unwrap();
    let host_url = stack.outputs["HostJobsQueueUrl"].clone();
    let host_arn = stack.outputs["HostJobsQueueArn"].clone();
    let dir = std::env::temp_dir().join(format!("schedkit-{}", stack.name));
    std::fs::create_dir_all(&dir).unwrap();
    let catalog = dir.join("catalog.toml");
    std::fs::write(&catalog, CATALOG).unwrap();
    let stage = stack.name.as_str();
    let console = |args: &[&str]| {
        let mut all = vec!["--stage", stage];
        all.extend_from_slice(args);
        let env = [("SCHEDKIT_HOST_QUEUE_URL".to_string(), host_url.clone())];
        processes::console_json_with(&stack, &catalog, &all, &env)
    };

    // Sync: the host job's schedule sends to the host jobs queue, the other's to the jobs
    // queue.
    console(&["schedules", "sync", "--yes"]);
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let target = |name: &'static str| {
        let scheduler = scheduler.clone();
        let group = stack.schedule_group.clone();
        async move {
            let s = scheduler
                .get_schedule()
                .group_name(group)
                .name(name)
                .send()
                .await
                .unwrap();
            s.target.unwrap().arn
        }
    };
    assert_eq!(target("nightly-etl").await, host_arn);
    assert_eq!(target("quick-sync").await, stack.outputs["JobsQueueArn"]);

    // Fired: both host runs wait in the host jobs queue; the jobs queue holds nothing.
    console(&["fire", "nightly-etl", "--key", "etl:1"]);
    console(&["fire", "broken-etl", "--key", "bad:1"]);
    assert_eq!(held(&stack, &host_url).await, 2);
    assert_eq!(held(&stack, &stack.queue_url).await, 0);

    // A poller on the host jobs queue runs them: one DONE, one to the DLQ from there.
    let env = [("SCHEDKIT_QUEUE_URL".to_string(), host_url.clone())];
    let worker = processes::worker_with(&stack, &catalog, "host-queue", "poller", &env);
    let mut ended = (None, None);
    for _ in 0..120 {
        ended = (
            stack.record("etl:1").await.unwrap(),
            stack.record("bad:1").await.unwrap(),
        );
        let finished = |r: &Option<schedkit::ExecutionRecord>| {
            r.as_ref()
                .is_some_and(|r| matches!(r.status, Status::Done | Status::Failed))
        };
        if finished(&ended.0) && finished(&ended.1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (etl, bad) = (ended.0.unwrap(), ended.1.unwrap());
    assert_eq!(etl.status, Status::Done, "{etl:?}");
    assert!(
        etl.result.as_deref().unwrap().contains("etl run etl:1"),
        "{etl:?}"
    );
    assert_eq!(bad.status, Status::Failed, "{bad:?}");
    // The letter names the host jobs queue as its source.
    let mut letters = Vec::new();
    for _ in 0..40 {
        letters = processes::console_json(&stack, &catalog, &["dlq", "list"])
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !letters.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The worker lives until the letter is there: it writes FAILED before it sends the
    // letter, and stopped in between (a loaded machine, once), its message would come
    // back only after the lease, to a worker no longer running.
    drop(worker);
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0]["source_queue"], host_url.as_str(), "{letters:?}");

    // Redriven: back to the host jobs queue, not to the function's.
    tokio::time::sleep(Duration::from_secs(2)).await; // the poller has ended
    console(&["dlq", "redrive", "--job", "broken-etl", "--yes"]);
    let back = stack
        .sqs
        .receive_message()
        .queue_url(&host_url)
        .message_attribute_names("All")
        .wait_time_seconds(5)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(back.len(), 1, "the letter is back on the host jobs queue");
    assert!(
        back[0].body.as_deref().unwrap().contains("bad:1"),
        "{back:?}"
    );
    let reason = back[0].message_attributes.as_ref().unwrap()[attr::REASON]
        .string_value
        .clone();
    assert!(reason.is_some(), "a redrive keeps the letter's reason");
    assert_eq!(held(&stack, &stack.queue_url).await, 0);
}
