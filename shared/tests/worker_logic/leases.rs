//! Leases kept by heartbeats: a job three times longer than its lease is never reclaimed
//! while its worker renews it. (On LocalStack this test needed an idle machine: a loaded
//! one delayed the heartbeats past the 1-second lease. Here time is simulated.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use schedkit::queue::MemoryQueue;
use schedkit::store::MemoryStore;
use schedkit::{Ctx, Envelope, JobPolicy, Jobs, Metrics, Status};
use serde_json::json;

use super::{drain_all, processor_of};

#[tokio::test(start_paused = true)]
async fn heartbeats_keep_a_job_longer_than_three_leases_from_being_reclaimed() {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(13));
    let runs = Arc::new(AtomicU32::new(0));
    let registry = {
        let runs = runs.clone();
        Jobs::new()
            .add("long-report", move |ctx: Ctx| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(3500)).await;
                    assert!(!ctx.lease_lost());
                    Ok::<_, schedkit::JobError>(json!({"rows": 35}))
                }
            })
            .bind_policies(
                |_| // Heartbeats every 250 ms renew the lease and the message's visibility.
            JobPolicy::default().with_lease(Duration::from_secs(1)),
            )
    };
    let workers: Vec<_> = (0..2)
        .map(|i| {
            processor_of(
                &store,
                &queue,
                registry.clone(),
                &format!("w{i}"),
                Metrics::capture().0,
            )
        })
        .collect();
    // Two deliveries of the run: the second meets the live lease, again and again.
    let mut e = Envelope::new("long-report", "2026-12-01T09:00:00Z".parse().unwrap());
    e.key = Some("report".into());
    queue.send_body(&e.to_json());
    queue.send_body(&e.to_json());
    let labels = drain_all(&workers, &queue, 1, Duration::from_secs(1)).await;

    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the job ran once: {labels:?}"
    );
    let count = |l: &str| labels.iter().filter(|x| *x == l).count();
    assert_eq!(count("succeeded"), 1, "{labels:?}");
    assert_eq!(count("duplicate"), 1, "{labels:?}");
    assert_eq!(count("lease-lost"), 0, "{labels:?}");
    let record = &store.snapshot().records["report"];
    assert_eq!((record.status, record.attempt), (Status::Done, 1));
}
