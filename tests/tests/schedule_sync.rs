//! Schedule sync against LocalStack's EventBridge Scheduler: creates, changes and deletes
//! schedules to match the catalog, writes nothing the second time, and a dry run (the
//! plan) prints the diff without writing.

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
        host_queue_arn: None,
        urgent_queues: false,
        role_arn: "arn:aws:iam::000000000000:role/scheduler".into(),
        dead_letter_arn: Some("arn:aws:sqs:us-east-1:000000000000:schedule-dlq".into()),
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

/// AWS refuses a StartDate more than five minutes ago. A rate whose catalog start has
/// passed is sent with the next run on its phase (the phase kept), a cron one with its next
/// run; a later sync, when that "next run" is itself past, compares by effect and writes
/// nothing. A one-time job whose time has passed is not created (and said so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_past_start_is_sent_as_the_next_run_on_its_phase_and_a_later_sync_writes_nothing() {
    let sdk = localstack().await;
    let writes = RequestCounter::writes();
    let client = aws_sdk_scheduler::Client::from_conf(
        aws_sdk_scheduler::config::Builder::from(&sdk)
            .interceptor(writes.clone())
            .build(),
    );
    let group = unique("sync-past");
    let targets = SyncTargets {
        queue_arn: "arn:aws:sqs:us-east-1:000000000000:jobs".into(),
        host_queue_arn: None,
        urgent_queues: false,
        role_arn: "arn:aws:iam::000000000000:role/scheduler".into(),
        dead_letter_arn: Some("arn:aws:sqs:us-east-1:000000000000:schedule-dlq".into()),
    };
    // 2020-01-01T00:17:00Z + k x 7 minutes: an odd phase that `now` cannot hit by luck.
    let jobs = r#"
[jobs.every-7m]
owner = "ops"
[jobs.every-7m.schedule]
expression = "rate(7 minutes)"
start = 2020-01-01T00:17:00Z

[jobs.hourly]
owner = "ops"
[jobs.hourly.schedule]
expression = "cron(5 * * * ? *)"
start = 2020-01-01T00:00:00Z

[jobs.migrate]
owner = "data"
[jobs.migrate.schedule]
expression = "at(2020-03-01T02:00:00)"
"#;
    let wanted = catalog(&group, jobs);
    let before = chrono::Utc::now();
    let plan = sync::plan(&client, &wanted, &targets).await.unwrap();
    assert_eq!(plan.finished, ["migrate"], "{plan}");
    assert!(plan.to_string().contains("migrate: no run left"), "{plan}");
    sync::apply(&client, &plan).await.unwrap();
    let start_of = |name: &'static str| {
        let client = client.clone();
        let group = group.clone();
        async move {
            let got = client
                .get_schedule()
                .group_name(&group)
                .name(name)
                .send()
                .await
                .unwrap();
            chrono::DateTime::from_timestamp(got.start_date.unwrap().secs(), 0).unwrap()
        }
    };
    let rate_start = start_of("every-7m").await;
    let phase: chrono::DateTime<chrono::Utc> = "2020-01-01T00:17:00Z".parse().unwrap();
    assert!(
        rate_start > before - chrono::Duration::minutes(5),
        "sent {rate_start}: AWS refuses a start more than 5 minutes ago"
    );
    assert!(rate_start <= before + chrono::Duration::minutes(8));
    assert_eq!(
        (rate_start - phase).num_seconds() % 420,
        0,
        "{rate_start} is off the catalog start's 7-minute phase"
    );
    let cron_start = start_of("hourly").await;
    assert!(
        cron_start > before - chrono::Duration::minutes(5),
        "{cron_start}"
    );
    assert!(
        client
            .get_schedule()
            .group_name(&group)
            .name("migrate")
            .send()
            .await
            .is_err(),
        "a one-time schedule whose time has passed was created"
    );

    // A later sync, the sent start still on the phase: nothing to write.
    writes.reset();
    let again = sync::plan(&client, &wanted, &targets).await.unwrap();
    assert!(again.is_empty(), "{again}");
    assert_eq!(writes.get(), 0);
}

/// An update of a schedule whose stored start has passed (the next run at the last sync,
/// a day ago) sends the start due now: AWS refuses a start more than 5 minutes ago, so
/// sending the stored one back would fail every edit of such a job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_sends_the_start_due_now_not_the_passed_one_it_found() {
    let sdk = localstack().await;
    let client = aws_sdk_scheduler::Client::new(&sdk);
    let group = unique("sync-restart");
    let targets = SyncTargets {
        queue_arn: "arn:aws:sqs:us-east-1:000000000000:jobs".into(),
        host_queue_arn: None,
        urgent_queues: false,
        role_arn: "arn:aws:iam::000000000000:role/scheduler".into(),
        dead_letter_arn: None,
    };
    let jobs = "[jobs.every-7m]\nowner = \"ops\"\n[jobs.every-7m.schedule]\nexpression = \"rate(7 minutes)\"\nstart = 2020-01-01T00:17:00Z\n";
    let plan = sync::plan(&client, &catalog(&group, jobs), &targets)
        .await
        .unwrap();
    sync::apply(&client, &plan).await.unwrap();
    // As a sync a day ago left it: its start then, on the same 7-minute phase.
    let got = client
        .get_schedule()
        .group_name(&group)
        .name("every-7m")
        .send()
        .await
        .unwrap();
    let day_ago = got.start_date.unwrap().secs() - 420 * 206;
    client
        .update_schedule()
        .group_name(&group)
        .name("every-7m")
        .set_schedule_expression(got.schedule_expression)
        .set_schedule_expression_timezone(got.schedule_expression_timezone)
        .start_date(aws_sdk_scheduler::primitives::DateTime::from_secs(day_ago))
        .set_description(got.description)
        .set_state(got.state)
        .set_flexible_time_window(got.flexible_time_window)
        .set_target(got.target)
        .send()
        .await
        .unwrap();
    let now = chrono::Utc::now().timestamp();
    let changed = jobs.replace("owner = \"ops\"", "owner = \"platform\"");
    let plan = sync::plan(&client, &catalog(&group, &changed), &targets)
        .await
        .unwrap();
    let [
        sync::Change::Update {
            config,
            differences,
            ..
        },
    ] = &plan.changes[..]
    else {
        panic!("one update: {plan}")
    };
    assert!(
        differences.iter().all(|d| !d.starts_with("start")),
        "the start is the same schedule: {differences:?}"
    );
    let sent = config.start.expect("a start");
    assert!(sent > now - 300, "sends {sent}, {} s ago", now - sent);
    assert_eq!((sent - day_ago) % 420, 0, "on the catalog's phase");
}
