//! SQS's fair queues on the jobs queue: a run is sent with its fair share as its
//! `MessageGroupId` (`schedkit::flow::message_group`), by a backfill and by a copy the
//! worker sends again, and the queue gives it back on receive. (LocalStack keeps the
//! group but not AWS's fair order: that part is AWS's.)

use chrono::{Duration as Days, Utc};
use schedkit::catalog::Catalog;
use schedkit::queue::{JobQueue, SqsQueue};
use schedkit::trigger::backfill;
use schedkit::{Ctx, Jobs, Metrics};
use schedkit_testkit::{Stack, StackOptions, localstack, unique};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_and_a_copy_sent_again_carry_the_runs_fair_share_as_their_group() {
    let sdk = localstack().await;
    let stack = Stack::lane("groups", StackOptions::default()).await;
    let job = unique("sync");
    let catalog = format!(
        "[limits.{job}-api]\nconcurrency = 4\nfair = \"{{tenant}}\"\n\n\
         [limits.{job}-pace]\nrate = \"12/minute\"\n\n\
         [jobs.{job}]\nowner = \"t\"\npayload = {{ tenant = \"acme\" }}\nlimits = [\"{job}-api\", \"{job}-pace\"]\n"
    );
    let catalog = Catalog::parse(&catalog, "groups.toml").unwrap();
    let times = [Utc::now() - Days::hours(2), Utc::now() - Days::hours(1)];
    let sent = backfill::enqueue(&sdk, &stack.queue_url, &catalog.jobs[&job], &times, |_| {})
        .await
        .unwrap();
    assert_eq!(sent, 2);

    let queue = SqsQueue::new(stack.sqs.clone(), &stack.queue_url, &stack.dlq_url);
    let mut received = Vec::new();
    while received.len() < 2 {
        let batch = queue.receive(10, 2, Some(30)).await.unwrap();
        assert!(!batch.is_empty(), "the backfill's two runs: {received:?}");
        received.extend(batch);
    }
    let group = format!("{job}/acme");
    for d in &received {
        assert_eq!(d.message_group.as_deref(), Some(group.as_str()), "{d:?}");
    }

    // A run a limit holds back is sent again: the copy keeps its message's group. The
    // rate lets one start every 5 s, so the second of the two comes back after about 5 s.
    let registry = Jobs::new()
        .add(&job, |_: Ctx| async {
            Ok::<_, schedkit::JobError>(json!(null))
        })
        .bind(&catalog)
        .unwrap();
    let worker = stack.processor(registry, "groups", Metrics::capture().0);
    // One after the other: taken in together, the second would be hidden unclaimed until
    // the first is through its fair gate (`batch::crowded`), not sent again.
    let mut reports = Vec::new();
    for delivery in received {
        reports.extend(worker.process_each(vec![delivery], None, None, None).await);
    }
    let held: Vec<_> = reports
        .iter()
        .filter(|r| r.outcome.label() == "throttled")
        .collect();
    assert_eq!(
        held.len(),
        1,
        "one of the two waits for the rate: {reports:?}"
    );
    let copy = queue.receive(1, 15, Some(30)).await.unwrap();
    assert_eq!(copy.len(), 1, "the copy sent again: {copy:?}");
    assert_eq!(
        copy[0].message_group.as_deref(),
        Some(group.as_str()),
        "{copy:?}"
    );
    assert_eq!(copy[0].text(schedkit::batch::WAITS), Some("1"), "{copy:?}");
}
