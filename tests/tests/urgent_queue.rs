//! The urgent queue beside the jobs queue (`schedkit::queue::urgent`) on SQS: a poller keeps
//! a receive open on it, so a run of positive priority starts however deep the jobs queue
//! is and however full the worker; every call on a copy it brought (hide, wake, send again,
//! delete) reaches the urgent queue, which drains once its runs are DONE.

use std::time::Duration;

use schedkit::catalog::Catalog;
use schedkit::poller::{self, PollOptions};
use schedkit::{Ctx, Envelope, Jobs, Metrics, Processor, Status};
use schedkit_testkit::{Stack, StackOptions, unique};
use serde_json::json;

fn run(job: &str, key: &str, priority: Option<i32>) -> String {
    let mut e = Envelope::new(job, "2026-12-06T09:00:00Z".parse().unwrap());
    e.key = Some(key.to_string());
    e.priority = priority;
    e.to_json()
}

async fn status(stack: &Stack, key: &str) -> Option<Status> {
    stack.record(key).await.unwrap().map(|r| r.status)
}

async fn send_urgent(stack: &Stack, body: &str) {
    stack
        .sqs
        .send_message()
        .queue_url(stack.urgent_queue_url())
        .message_body(body)
        .send()
        .await
        .unwrap();
}

/// Waits until `key`'s record has `wanted` status; how long it took.
async fn until(stack: &Stack, key: &str, wanted: Status, most: Duration) -> Duration {
    let start = tokio::time::Instant::now();
    while status(stack, key).await != Some(wanted) {
        assert!(
            start.elapsed() < most,
            "`{key}` is not {wanted:?} after {most:?} (it is {:?})",
            status(stack, key).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

/// One poller of concurrency 2 behind 200 one-second runs: a run sent to the urgent queue
/// starts within 2 s though both places are taken. Then two urgent runs of a job limited to
/// one at a time: the second waits for the first's permit (its copy hidden and woken on the
/// urgent queue), both are DONE once, and the urgent queue drains (a call sent to the jobs
/// queue with an urgent receipt would fail, and the copies would keep coming back).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_urgent_run_skips_the_backlog_and_a_full_worker_and_its_queue_drains() {
    let stack = Stack::lane("urgent", StackOptions::default()).await;
    let (slow, single) = (unique("slow"), unique("single"));
    let catalog = format!(
        "[jobs.{slow}]\nowner = \"t\"\nlease_seconds = 30\n\n\
         [jobs.{single}]\nowner = \"t\"\nlease_seconds = 30\nconcurrency = {{ limit = 1 }}\npriority = 5\n"
    );
    let catalog = Catalog::parse(&catalog, "urgent.toml").unwrap();
    let sleep = |ctx: Ctx| async move {
        let seconds = ctx.payload.get("seconds").and_then(|s| s.as_f64());
        tokio::time::sleep(Duration::from_secs_f64(seconds.unwrap_or(1.0))).await;
        Ok::<_, schedkit::JobError>(json!(null))
    };
    let registry = Jobs::new()
        .add(&slow, sleep)
        .add(&single, sleep)
        .bind(&catalog)
        .unwrap();
    let mut config = stack.config("urgent-poller");
    config.concurrency = 2;
    let worker = Processor::new(
        stack.store(),
        stack.sqs.clone(),
        registry,
        config,
        Metrics::capture().0,
    );
    let backlog: Vec<String> = (0..200)
        .map(|i| run(&slow, &format!("{slow}-{i}"), None))
        .collect();
    stack
        .send_all(backlog.iter().map(String::as_str))
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let polling = tokio::spawn(async move {
        let options = PollOptions {
            wait_seconds: 2,
            ..PollOptions::default()
        };
        poller::poll(&worker, &options, async {
            let _ = stopped.await;
        })
        .await
    });
    until(
        &stack,
        &format!("{slow}-0"),
        Status::Running,
        Duration::from_secs(30),
    )
    .await;

    let urgent = format!("{slow}-urgent");
    send_urgent(&stack, &run(&slow, &urgent, Some(10))).await;
    let waited = until(&stack, &urgent, Status::Running, Duration::from_secs(10)).await;
    assert!(
        waited < Duration::from_secs(2),
        "the urgent run waited {waited:?} behind 200 runs"
    );

    let (first, second) = (format!("{single}-1"), format!("{single}-2"));
    send_urgent(&stack, &run(&single, &first, None)).await;
    until(&stack, &first, Status::Running, Duration::from_secs(10)).await;
    send_urgent(&stack, &run(&single, &second, None)).await;
    until(&stack, &second, Status::Done, Duration::from_secs(30)).await;
    let first_record = stack.record(&first).await.unwrap().unwrap();
    let second_record = stack.record(&second).await.unwrap().unwrap();
    assert_eq!(first_record.status, Status::Done);
    assert!(
        second_record.started_at >= first_record.finished_at,
        "the limit of one held: {second_record:?} started before {first_record:?} finished"
    );
    assert_eq!(second_record.attempt, 1, "{second_record:?}");

    let urgent_url = stack.urgent_queue_url();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (visible, in_flight, delayed) = stack.counts(&urgent_url).await.unwrap();
        if visible + in_flight + delayed == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the urgent queue still holds {visible} visible, {in_flight} in flight, {delayed} delayed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = stop.send(());
    let stats = polling.await.unwrap();
    assert_eq!(
        stats.outcomes.get("duplicate"),
        None,
        "no copy came back: {stats:?}"
    );
}
