//! Schedule sync against LocalStack's EventBridge Scheduler: creates, changes and deletes
//! schedules to match the catalog, writes nothing the second time, and a dry run (the
//! plan) prints the diff without writing.

use std::collections::BTreeMap;

use aws_sdk_scheduler::types::ScheduleState;
use schedkit::catalog::Catalog;
use schedkit::trigger::sync::{self, SyncTargets};
use schedkit::trigger::template::envelope_template;
use schedkit_testkit::{RequestCounter, localstack, unique};
use serde_json::json;

fn catalog(group: &str, jobs: &str) -> Catalog {
    let text = format!("[settings]\nschedule_group = \"{group}\"\n{jobs}");
    Catalog::parse(&text, "sync-test.toml").unwrap_or_else(|e| panic!("{e}"))
}

const FIRST: &str = r#"
[jobs.nightly-report]
owner = "data"
payload = { seconds = 3 }
[jobs.nightly-report.schedule]
expression = "cron(0 3 * * ? *)"
timezone = "Europe/Berlin"

[jobs.crm-sync]
owner = "crm"
[jobs.crm-sync.schedule]
expression = "rate(6 hours)"
start = 2030-01-01T00:00:00Z
flexible_window_minutes = 10

[jobs.partner-export]
owner = "partners"
[jobs.partner-export.schedule]
expression = "cron(30 9 ? * MON-FRI *)"
timezone = "America/New_York"
enabled = false
delivery_retries = 3
max_event_age_seconds = 3600

[jobs.on-demand]
owner = "ops"
"#;

// nightly-report moves to 04:00, crm-sync is gone, quarter-close is new, partner-export stays.
const SECOND: &str = r#"
[jobs.nightly-report]
owner = "data"
payload = { seconds = 3 }
[jobs.nightly-report.schedule]
expression = "cron(0 4 * * ? *)"
timezone = "Europe/Berlin"

[jobs.partner-export]
owner = "partners"
[jobs.partner-export.schedule]
expression = "cron(30 9 ? * MON-FRI *)"
timezone = "America/New_York"
enabled = false
delivery_retries = 3
max_event_age_seconds = 3600

[jobs.quarter-close]
owner = "finance"
[jobs.quarter-close.schedule]
expression = "at(2030-03-31T23:00:00)"
timezone = "Europe/Berlin"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_creates_changes_and_deletes_and_a_second_run_writes_nothing() {
    let sdk = localstack().await;
    let writes = RequestCounter::writes();
    let client = aws_sdk_scheduler::Client::from_conf(
        aws_sdk_scheduler::config::Builder::from(&sdk)
            .interceptor(writes.clone())
            .build(),
    );
    let group = unique("sync");
    let targets = SyncTargets {
        queue_arn: "arn:aws:sqs:us-east-1:000000000000:jobs".into(),
        role_arn: "arn:aws:iam::000000000000:role/scheduler".into(),
        dead_letter_arn: Some("arn:aws:sqs:us-east-1:000000000000:schedule-dlq".into()),
        chains: BTreeMap::new(),
    };

    // First sync: the group and three schedules (the unscheduled job gets none).
    let first = catalog(&group, FIRST);
    let plan = sync::plan(&client, &first, &targets).await.unwrap();
    assert_eq!(writes.get(), 0, "planning (the dry run) writes nothing");
    let printed = plan.to_string();
    for line in [
        format!("+ create schedule group {group}"),
        "+ create crm-sync: rate(6 hours) (UTC)".into(),
        "+ create nightly-report: cron(0 3 * * ? *) (Europe/Berlin)".into(),
        "+ create partner-export: cron(30 9 ? * MON-FRI *) (America/New_York), disabled".into(),
    ] {
        assert!(printed.contains(&line), "missing `{line}` in:\n{printed}");
    }
    assert_eq!(sync::apply(&client, &plan).await.unwrap(), 4);
    assert_eq!(writes.get(), 4);

    let got = client
        .get_schedule()
        .group_name(&group)
        .name("nightly-report")
        .send()
        .await
        .unwrap();
    assert_eq!(
        got.schedule_expression.as_deref(),
        Some("cron(0 3 * * ? *)")
    );
    assert_eq!(
        got.schedule_expression_timezone.as_deref(),
        Some("Europe/Berlin")
    );
    let target = got.target.unwrap();
    assert_eq!(target.arn, targets.queue_arn);
    let payload = json!({"seconds": 3}).as_object().cloned().unwrap();
    assert_eq!(
        target.input.as_deref(),
        Some(envelope_template("nightly-report", &payload).as_str())
    );
    let export = client
        .get_schedule()
        .group_name(&group)
        .name("partner-export")
        .send()
        .await
        .unwrap();
    assert_eq!(export.state, Some(ScheduleState::Disabled));
    assert_eq!(
        export
            .target
            .unwrap()
            .retry_policy
            .unwrap()
            .maximum_retry_attempts,
        Some(3)
    );

    // Second sync of the same catalog: nothing to do, no write.
    writes.reset();
    let again = sync::plan(&client, &first, &targets).await.unwrap();
    assert!(again.is_empty(), "{again}");
    assert_eq!(sync::apply(&client, &again).await.unwrap(), 0);
    assert_eq!(writes.get(), 0, "a repeated sync makes no write call");

    // The catalog changes: one update, one delete, one create.
    let second = catalog(&group, SECOND);
    let plan = sync::plan(&client, &second, &targets).await.unwrap();
    let printed = plan.to_string();
    for line in [
        "~ update nightly-report:\n    expression: cron(0 3 * * ? *) → cron(0 4 * * ? *)",
        "- delete crm-sync (not in the catalog)",
        "+ create quarter-close: at(2030-03-31T23:00:00) (Europe/Berlin)",
    ] {
        assert!(printed.contains(line), "missing `{line}` in:\n{printed}");
    }
    assert!(!printed.contains("partner-export"), "{printed}");
    assert_eq!(sync::apply(&client, &plan).await.unwrap(), 3);
    let names: Vec<_> = client
        .list_schedules()
        .group_name(&group)
        .send()
        .await
        .unwrap()
        .schedules
        .into_iter()
        .filter_map(|s| s.name)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(names, ["nightly-report", "partner-export", "quarter-close"]);
    let moved = client
        .get_schedule()
        .group_name(&group)
        .name("nightly-report")
        .send()
        .await
        .unwrap();
    assert_eq!(
        moved.schedule_expression.as_deref(),
        Some("cron(0 4 * * ? *)")
    );
    assert!(
        sync::plan(&client, &second, &targets)
            .await
            .unwrap()
            .is_empty()
    );
}
