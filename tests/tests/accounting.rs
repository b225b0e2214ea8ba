//! The accountant's reading of a stage's executions table (the `by-job` index): six hours of
//! two hourly jobs' firings, one with no record (missed), one still RUNNING past its
//! deadline (late), the rest DONE; a job paused half-way is not expected from its pause on.

use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use schedkit::catalog::Catalog;
use schedkit::ops::accountant::account;
use schedkit::ops::executions::Records;
use schedkit::store::{ClaimOutcome, ClaimRequest, ExecutionStore, Finish, PauseRecord};
use schedkit_testkit::{Stack, StackOptions, localstack};

const CATALOG: &str = r#"
[jobs.hourly]
owner = "data"
deadline = "20m"
[jobs.hourly.schedule]
expression = "rate(1 hour)"
start = 2026-01-01T00:00:00Z

[jobs.paused-job]
owner = "data"
[jobs.paused-job.schedule]
expression = "rate(1 hour)"
start = 2026-01-01T00:00:00Z
"#;

/// A run of `name` due at `at`, claimed then, and DONE unless `running`.
async fn run(store: &dyn ExecutionStore, name: &str, at: DateTime<Utc>, running: bool) {
    let scheduled = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let claim = ClaimRequest {
        key: format!("{name}#{scheduled}"),
        job: name.into(),
        scheduled_for: scheduled,
        payload_hash: "h".into(),
        input: "{}".into(),
        message_id: None,
        owner: "w:1".into(),
        now: at,
        lease: Duration::from_secs(60),
        retention: Duration::from_secs(30 * 86_400),
        redrive: None,
    };
    let ClaimOutcome::Claimed { record, .. } = store.claim(&claim).await.unwrap() else {
        panic!("{name} at {at} not claimed")
    };
    if !running {
        let done = Finish::Succeeded {
            result: serde_json::json!(null),
        };
        store
            .finish(&record, &done, at + TimeDelta::minutes(1))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_hours_of_firings_missed_and_late_ones_named_and_a_paused_jobs_not_expected() {
    let sdk = localstack().await;
    let stack = Stack::lane("account", StackOptions::default()).await;
    let store = stack.store();
    let catalog = Catalog::parse(CATALOG, "catalog.toml").unwrap();
    let now = Utc::now();
    let from = now.duration_trunc(TimeDelta::hours(1)).unwrap() - TimeDelta::hours(7);
    let hour = |h: i64| from + TimeDelta::hours(h);
    for h in [0, 1, 2, 5] {
        run(&store, "hourly", hour(h), false).await;
    }
    run(&store, "hourly", hour(3), true).await; // still RUNNING, long past its 20 minutes
    // hour 4: no record at all.
    run(&store, "paused-job", hour(1), false).await;
    run(&store, "paused-job", hour(2), false).await;
    let paused = [PauseRecord {
        job: "paused-job".into(),
        by: "ops".into(),
        at: (hour(2) + TimeDelta::minutes(30)).to_rfc3339(),
        reason: "migrating".into(),
    }];

    let records = Records::new(&sdk, &stack.table);
    let found = account(&records, &catalog, from, hour(6), now, &paused)
        .await
        .unwrap();
    let keys = |list: &[schedkit::ops::accountant::Unaccounted]| {
        list.iter().map(|u| u.key.clone()).collect::<Vec<_>>()
    };
    let key = |name: &str, h: i64| {
        format!(
            "{name}#{}",
            hour(h).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    };
    // Six of `hourly`, three of `paused-job` (00, 01, 02: not after its pause).
    assert_eq!(found.expected, 9, "{found:#?}");
    assert_eq!(
        keys(&found.missed),
        [key("paused-job", 0), key("hourly", 4)],
        "{found:#?}"
    );
    assert_eq!(keys(&found.late), [key("hourly", 3)], "{found:#?}");
    assert_eq!(found.late[0].status, Some(schedkit::Status::Running));
    assert_eq!(found.queries, 2, "one query per name");
}
