//! `executions list` against a deployed table: without filters it is newest first across
//! every page and holds each record once (it was one unordered Scan page, sorted within
//! the page); DONE records are listed by status too, yet the status index holds only open
//! records (it put every DONE record on one partition key).

use std::collections::BTreeSet;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use schedkit::ops::executions::{Filter, Records};
use schedkit::store::{ClaimOutcome, ClaimRequest, Finish};
use schedkit::{DynamoStore, Status};
use schedkit_testkit::{Stack, StackOptions, localstack};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executions_are_listed_newest_first_across_pages_and_done_ones_stay_off_the_status_index() {
    let sdk = localstack().await;
    let stack = Stack::lane("listing", StackOptions::default()).await;
    let store = DynamoStore::new(stack.ddb.clone(), &stack.table);
    // 40 records a second apart, in an order unrelated to their keys: every third stays
    // RUNNING, every fifth (of the others) FAILED, the rest DONE.
    let base: DateTime<Utc> = "2026-11-30T10:00:00Z".parse().unwrap();
    let mut statuses = Vec::new();
    for i in 0..40u32 {
        let at = base + chrono::Duration::seconds(i64::from((i * 17) % 40));
        let key = format!("listing-{i}");
        let ClaimOutcome::Claimed {
            record: claimed, ..
        } = store
            .claim(&ClaimRequest {
                key: key.clone(),
                job: "listing".into(),
                scheduled_for: at.to_rfc3339(),
                payload_hash: "h".into(),
                input: "{}".into(),
                message_id: Some(format!("m{i}")),
                owner: format!("o{i}"),
                now: at,
                lease: Duration::from_secs(3600 * 24 * 365),
                retention: Duration::from_secs(3600),
                redrive: None,
            })
            .await
            .unwrap()
        else {
            panic!("not claimed");
        };
        let status = if i % 3 == 0 {
            Status::Running
        } else if i % 5 == 0 {
            store
                .finish(&claimed, &Finish::Failed { error: "no".into() }, at)
                .await
                .unwrap();
            Status::Failed
        } else {
            store
                .finish(
                    &claimed,
                    &Finish::Succeeded {
                        result: serde_json::json!(null),
                    },
                    at,
                )
                .await
                .unwrap();
            Status::Done
        };
        statuses.push((key, status));
    }

    let records = Records::new(&sdk, &stack.table);
    let all = |status: Option<Status>| {
        let records = records.clone();
        async move {
            let mut seen = Vec::new();
            let mut page = None;
            let mut pages = 0;
            loop {
                let (got, next) = records
                    .list(&Filter {
                        status,
                        limit: 7,
                        page: page.clone(),
                        ..Filter::default()
                    })
                    .await
                    .unwrap();
                assert!(got.len() <= 7);
                seen.extend(
                    got.into_iter()
                        .map(|r| (r.updated_at, r.execution_key, r.status)),
                );
                pages += 1;
                assert!(pages < 30, "pages never end");
                match next {
                    Some(n) => page = Some(n),
                    None => return seen,
                }
            }
        }
    };

    let listed = all(None).await;
    let times: Vec<&String> = listed.iter().map(|(t, _, _)| t).collect();
    let mut newest_first = times.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(times, newest_first, "newest first across pages");
    let keys: BTreeSet<&String> = listed.iter().map(|(_, k, _)| k).collect();
    assert_eq!((listed.len(), keys.len()), (40, 40), "each record once");

    let done = all(Some(Status::Done)).await;
    let wanted = statuses.iter().filter(|(_, s)| *s == Status::Done).count();
    assert_eq!(done.len(), wanted);
    assert!(done.iter().all(|(_, _, s)| *s == Status::Done));
    let running = all(Some(Status::Running)).await;
    assert_eq!(
        running.len(),
        statuses
            .iter()
            .filter(|(_, s)| *s == Status::Running)
            .count()
    );

    // The status index is sparse: a DONE record carries no `open_status`.
    let item = stack
        .ddb
        .get_item()
        .table_name(&stack.table)
        .key("execution_key", AttributeValue::S("listing-1".into()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(item["status"].as_s().unwrap(), "DONE");
    assert!(!item.contains_key("open_status"), "{item:?}");
    let open = stack
        .ddb
        .scan()
        .table_name(&stack.table)
        .index_name("open-by-status")
        .send()
        .await
        .unwrap();
    assert_eq!(
        open.count as usize,
        statuses.iter().filter(|(_, s)| *s != Status::Done).count(),
        "only open records are on the status index"
    );
}
