//! The poller never waits for its slowest message: it keeps up to its concurrency in hand
//! and receives again as soon as one finishes.

use std::time::Duration;

use schedkit::{Ctx, Envelope, JobPolicy, Jobs, Metrics, Status};
use schedkit_testkit::{Stack, StackOptions, unique};
use serde_json::json;

/// One poller, a 20-second job in hand, then 30 short jobs: every short one is DONE while
/// the long one still runs. (They all waited for it: a poller received again only once
/// its whole batch was done.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_long_job_in_hand_holds_back_no_other_message() {
    let stack = Stack::lane("poller", StackOptions::default()).await;
    let job = unique("sleeps");
    let policy = JobPolicy::default().with_lease(Duration::from_secs(10));
    let registry = Jobs::new()
        .add(&job, |ctx: Ctx| async move {
            let seconds = ctx.payload.get("seconds").and_then(|s| s.as_f64());
            tokio::time::sleep(Duration::from_secs_f64(seconds.unwrap_or(0.0))).await;
            Ok::<_, schedkit::JobError>(json!(null))
        })
        .bind_policies(|_| policy.clone());
    let worker = stack.processor(registry, "w", Metrics::capture().0);
    let run = |key: &str, seconds: f64| {
        let mut e = Envelope::new(&job, "2026-12-02T09:00:00Z".parse().unwrap());
        e.key = Some(key.to_string());
        e.payload = json!({ "seconds": seconds }).as_object().cloned();
        e
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let polling = tokio::spawn(async move {
        let options = schedkit::poller::PollOptions {
            wait_seconds: 1,
            ..Default::default()
        };
        schedkit::poller::poll(&worker, &options, async {
            let _ = stopped.await;
        })
        .await
    });
    let long = unique("long");
    stack.send_envelope(&run(&long, 20.0)).await.unwrap();
    let running = |key: String| {
        let stack = &stack;
        async move { stack.record(&key).await.unwrap().map(|r| r.status) }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while running(long.clone()).await != Some(Status::Running) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the long job never started"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let short: Vec<String> = (0..30).map(|i| format!("{long}-short-{i}")).collect();
    let bodies: Vec<String> = short.iter().map(|k| run(k, 0.1).to_json()).collect();
    stack
        .send_all(bodies.iter().map(String::as_str))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut done = 0;
        for key in &short {
            if running(key.clone()).await == Some(Status::Done) {
                done += 1;
            }
        }
        if done == short.len() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{done} short jobs DONE"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(
        running(long.clone()).await,
        Some(Status::Running),
        "the short jobs waited for the long one"
    );
    let _ = stop.send(());
    let stats = polling.await.unwrap();
    assert_eq!(
        stats.outcomes.get("succeeded"),
        Some(&31),
        "{:?}",
        stats.outcomes
    );
}
