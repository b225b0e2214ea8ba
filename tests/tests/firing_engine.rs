//! The local firing engine against LocalStack: a fast-forwarded day of cron, rate and at
//! schedules in two time zones yields exactly the expected envelopes; two engines at once
//! fire nothing twice; a disabled schedule fires nothing; a one-time schedule with DELETE
//! is gone after firing, a recurring one with DELETE after its last firing before its end
//! date; a dead target goes to the DLQ at once without holding the healthy schedules
//! back; flexible windows spread firings (reproducibly by seed); and a schedule
//! runs end to end through the worker to a DONE record.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_scheduler::types::ActionAfterCompletion;
use chrono::{DateTime, Utc};
use schedkit::catalog::Catalog;
use schedkit::trigger::once_group;
use schedkit::trigger::one_off::{self, Enqueued, OneOffTarget};
use schedkit::trigger::sync::{self, SyncTargets};
use schedkit::{Envelope, Metrics, Status};
use schedkit_firing_engine::{Delivery, Engine, EngineOptions};
use schedkit_testkit::{Stack, StackOptions, localstack, schedules as test_schedules, unique};

pub(crate) fn utc(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// Syncs `jobs` into a fresh group whose schedules target the stack's queue.
pub(crate) async fn schedules(
    sdk: &aws_config::SdkConfig,
    stack: &Stack,
    jobs: &str,
    queue_arn: &str,
) -> String {
    let group = unique("ff");
    let text = format!("[settings]\nschedule_group = \"{group}\"\n{jobs}");
    let catalog = Catalog::parse(&text, "engine-test.toml").unwrap_or_else(|e| panic!("{e}"));
    let scheduler = aws_sdk_scheduler::Client::new(sdk);
    let targets = SyncTargets {
        queue_arn: queue_arn.into(),
        host_queue_arn: None,
        urgent_queues: false,
        role_arn: "arn:aws:iam::000000000000:role/scheduler".into(),
        dead_letter_arn: Some(stack.arn_of(&stack.schedule_dlq_url)),
    };
    let plan = sync::plan(&scheduler, &catalog, &targets).await.unwrap();
    sync::apply(&scheduler, &plan).await.unwrap();
    group
}

pub(crate) fn engine(
    sdk: &aws_config::SdkConfig,
    stack: &Stack,
    group: &str,
    owner: &str,
) -> Engine {
    Engine::new(
        sdk,
        EngineOptions {
            groups: vec![group.to_string(), once_group(group)],
            claims_table: Some(stack.firings_table.clone()),
            owner: owner.into(),
            ..EngineOptions::default()
        },
    )
}

/// Every envelope on the jobs queue, grouped by job: the scheduled times, sorted.
pub(crate) async fn envelopes(stack: &Stack) -> BTreeMap<String, Vec<String>> {
    let mut by_job: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in stack.receive(100, Duration::from_secs(3)).await.unwrap() {
        let e = Envelope::parse(m.body.as_deref().unwrap()).unwrap();
        assert!(
            e.execution_id.is_some() && e.schedule_arn.is_some(),
            "context attributes filled in"
        );
        assert_eq!(e.attempt, Some(1));
        by_job
            .entry(e.job)
            .or_default()
            .push(e.scheduled_for.to_rfc3339());
    }
    for times in by_job.values_mut() {
        times.sort();
    }
    by_job
}

const DAY: &str = r#"
[jobs.ny-open]
owner = "trading"
[jobs.ny-open.schedule]
expression = "cron(0 9 ? * MON-FRI *)"
timezone = "America/New_York"

[jobs.berlin-quarterly]
owner = "ops"
[jobs.berlin-quarterly.schedule]
expression = "cron(0 */6 * * ? *)"
timezone = "Europe/Berlin"

[jobs.every-4h]
owner = "ops"
[jobs.every-4h.schedule]
expression = "rate(4 hours)"
start = 2030-06-03T01:00:00Z

[jobs.close]
owner = "finance"
[jobs.close.schedule]
expression = "at(2030-06-03T15:30:00)"
timezone = "Europe/Berlin"

[jobs.paused]
owner = "ops"
[jobs.paused.schedule]
expression = "rate(1 minute)"
start = 2030-06-03T00:00:00Z
enabled = false
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fast_forwarded_day_fires_exactly_the_expected_envelopes_once() {
    let sdk = localstack().await;
    let stack = Stack::lane("engine", StackOptions::default()).await;
    let queue_arn = stack.arn_of(&stack.queue_url);
    let group = schedules(&sdk, &stack, DAY, &queue_arn).await;

    // A one-off run far enough ahead to become a one-time schedule that deletes itself.
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let mut once = Envelope::new("one-off-report", utc("2030-06-03T12:00:00Z"));
    once.key = Some("one-off-report:2030-06-03".into());
    let target = OneOffTarget {
        queue_url: stack.queue_url.clone(),
        queue_arn: queue_arn.clone(),
        role_arn: "arn:aws:iam::000000000000:role/scheduler".into(),
        group: group.clone(),
        dead_letter_arn: None,
    };
    let Enqueued::Scheduled { name, .. } = one_off::enqueue(&sdk, &target, &once, Utc::now())
        .await
        .unwrap()
    else {
        panic!("a run years ahead is scheduled, not queued");
    };

    // Two engines fast-forward the same day at the same time.
    let (from, to) = (utc("2030-06-03T00:00:00Z"), utc("2030-06-04T00:00:00Z"));
    let (a, b) = (
        engine(&sdk, &stack, &group, "engine-a"),
        engine(&sdk, &stack, &group, "engine-b"),
    );
    let (fa, fb) = tokio::join!(a.fast_forward(from, to), b.fast_forward(from, to));
    let all: Vec<_> = fa.unwrap().into_iter().chain(fb.unwrap()).collect();
    let delivered = all
        .iter()
        .filter(|f| matches!(f.delivery, Delivery::Delivered { .. }))
        .count();
    let elsewhere = all
        .iter()
        .filter(|f| f.delivery == Delivery::FiredElsewhere)
        .count();
    assert_eq!(delivered, 13, "{all:#?}");
    assert_eq!(delivered + elsewhere, all.len());

    let expected: BTreeMap<String, Vec<String>> = [
        // 09:00 New York summer time.
        ("ny-open", vec!["2030-06-03T13:00:00+00:00"]),
        // 00:00, 06:00, 12:00, 18:00 Berlin summer time; 00:00 of June 3 was 22:00 UTC of June 2.
        (
            "berlin-quarterly",
            vec![
                "2030-06-03T04:00:00+00:00",
                "2030-06-03T10:00:00+00:00",
                "2030-06-03T16:00:00+00:00",
                "2030-06-03T22:00:00+00:00",
            ],
        ),
        (
            "every-4h",
            vec![
                "2030-06-03T01:00:00+00:00",
                "2030-06-03T05:00:00+00:00",
                "2030-06-03T09:00:00+00:00",
                "2030-06-03T13:00:00+00:00",
                "2030-06-03T17:00:00+00:00",
                "2030-06-03T21:00:00+00:00",
            ],
        ),
        ("close", vec!["2030-06-03T13:30:00+00:00"]),
        ("one-off-report", vec!["2030-06-03T12:00:00+00:00"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        envelopes(&stack).await,
        expected,
        "no duplicates, nothing from the paused schedule"
    );

    // The one-time schedule with DELETE is gone; the catalog's own at() schedule stays.
    let gone = scheduler
        .get_schedule()
        .group_name(once_group(&group))
        .name(&name)
        .send()
        .await;
    assert!(
        gone.unwrap_err()
            .as_service_error()
            .is_some_and(|e| e.is_resource_not_found_exception())
    );
    assert!(
        scheduler
            .get_schedule()
            .group_name(&group)
            .name("close")
            .send()
            .await
            .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recurring_schedule_with_delete_runs_until_its_end_date_then_is_gone() {
    let sdk = localstack().await;
    let stack = Stack::lane("until", StackOptions::default()).await;
    let queue_arn = stack.arn_of(&stack.queue_url);
    let group = schedules(&sdk, &stack, "", &queue_arn).await;
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    // A recurring schedule with an end date and DELETE: every run before the end, then gone.
    test_schedules::to_queue(
        &scheduler,
        &group,
        "hourly-until-3",
        "cron(0 * * * ? *)",
        &queue_arn,
        Some(
            r#"{"job":"hourly","scheduled_for":"<aws.scheduler.scheduled-time>","execution_id":"<aws.scheduler.execution-id>","schedule_arn":"<aws.scheduler.schedule-arn>","attempt":<aws.scheduler.attempt-number>}"#,
        ),
    )
    .end_date(aws_sdk_scheduler::primitives::DateTime::from_secs(
        utc("2030-06-03T03:00:00Z").timestamp(),
    ))
    .action_after_completion(ActionAfterCompletion::Delete)
    .send()
    .await
    .unwrap();
    let gone = || async { !test_schedules::exists(&scheduler, &group, "hourly-until-3").await };
    // Two passes, as a real-time engine re-reads the schedules on every tick: the first
    // run must not delete the schedule, or the later ones would never fire.
    let engine = engine(&sdk, &stack, &group, "engine");
    let first = engine
        .fast_forward(utc("2030-06-03T00:00:00Z"), utc("2030-06-03T01:30:00Z"))
        .await
        .unwrap();
    assert_eq!(first.len(), 2);
    assert!(
        !gone().await,
        "still there: runs are left before the end date"
    );
    let rest = engine
        .fast_forward(utc("2030-06-03T01:30:00Z"), utc("2030-06-04T00:00:00Z"))
        .await
        .unwrap();
    assert_eq!(rest.len(), 1, "{rest:#?}");
    assert!(gone().await, "deleted after its last run");
    let expected: BTreeMap<String, Vec<String>> = [(
        "hourly".to_string(),
        [
            "2030-06-03T00:00:00+00:00",
            "2030-06-03T01:00:00+00:00",
            "2030-06-03T02:00:00+00:00",
        ]
        .map(String::from)
        .to_vec(),
    )]
    .into();
    assert_eq!(envelopes(&stack).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_real_time_a_due_one_time_schedule_fires_once_and_is_deleted() {
    let sdk = localstack().await;
    let stack = Stack::lane("realtime", StackOptions::default()).await;
    let group = unique("rt");
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let target = OneOffTarget {
        queue_url: stack.queue_url.clone(),
        queue_arn: stack.arn_of(&stack.queue_url),
        role_arn: "arn:aws:iam::000000000000:role/scheduler".into(),
        group: group.clone(),
        dead_letter_arn: None,
    };
    // Due in 2 s: enqueue it as if it were due in 20 minutes, so it becomes a schedule.
    let now = Utc::now();
    let due = now + chrono::Duration::seconds(2);
    let due = due - chrono::Duration::nanoseconds(i64::from(due.timestamp_subsec_nanos()));
    let envelope = Envelope::new("soon", due);
    let Enqueued::Scheduled { name, .. } = one_off::enqueue(
        &sdk,
        &target,
        &envelope,
        now - chrono::Duration::minutes(20),
    )
    .await
    .unwrap() else {
        panic!("expected a one-time schedule");
    };
    let engine = engine(&sdk, &stack, &group, "real-time");
    let run = engine.run(
        Duration::from_millis(500),
        tokio::time::sleep(Duration::from_secs(5)),
    );
    run.await.unwrap();
    let got = envelopes(&stack).await;
    assert_eq!(got.get("soon"), Some(&vec![due.to_rfc3339()]), "{got:?}");
    let gone = scheduler
        .get_schedule()
        .group_name(once_group(&group))
        .name(&name)
        .send()
        .await;
    assert!(gone.is_err(), "deleted after completion");
}

/// One dead target among healthy schedules (fast-forwarded): the healthy ones are each
/// delivered at their scheduled time with one attempt; the dead one (its queue does not
/// exist: no retry can cure that) goes to the schedule DLQ at once, with the attributes AWS
/// puts on its dead letters. (The engine retried it in place 185 times, holding every other
/// schedule back, and never told a dead target from a passing failure.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_target_is_dead_lettered_at_once_and_holds_no_healthy_schedule_back() {
    let sdk = localstack().await;
    let stack = Stack::lane("engine-dlq", StackOptions::default()).await;
    let queue_arn = stack.arn_of(&stack.queue_url);
    let healthy = r#"
[jobs.hourly]
owner = "ops"
[jobs.hourly.schedule]
expression = "cron(0 * * * ? *)"

[jobs.half-past]
owner = "ops"
[jobs.half-past.schedule]
expression = "cron(30 * * * ? *)"
"#;
    let group = schedules(&sdk, &stack, healthy, &queue_arn).await;
    let dead_jobs = format!(
        "[settings]\nschedule_group = \"{group}\"\n{healthy}\n[jobs.export]\nowner = \"partners\"\n[jobs.export.schedule]\nexpression = \"cron(0 12 * * ? *)\"\n"
    );
    // The dead schedule: same group, its target a queue that does not exist.
    let missing_queue = "arn:aws:sqs:us-east-1:000000000000:no-such-queue";
    let catalog = Catalog::parse(&dead_jobs, "engine-test.toml").unwrap();
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let mut plan = sync::plan(
        &scheduler,
        &catalog,
        &SyncTargets {
            queue_arn: missing_queue.into(),
            host_queue_arn: None,
            urgent_queues: false,
            role_arn: "arn:aws:iam::000000000000:role/scheduler".into(),
            dead_letter_arn: Some(stack.arn_of(&stack.schedule_dlq_url)),
        },
    )
    .await
    .unwrap();
    plan.changes
        .retain(|c| matches!(c, sync::Change::Create { name, .. } if name == "export"));
    sync::apply(&scheduler, &plan).await.unwrap();

    let firings = engine(&sdk, &stack, &group, "engine")
        .fast_forward(utc("2030-06-03T00:00:00Z"), utc("2030-06-04T00:00:00Z"))
        .await
        .unwrap();
    assert_eq!(firings.len(), 49, "24 + 24 healthy, 1 dead");
    for f in firings.iter().filter(|f| f.schedule != "export") {
        assert_eq!(f.delivery, Delivery::Delivered { attempts: 1 }, "{f:?}");
        assert_eq!(f.attempted_at, Some(f.scheduled_time), "on time: {f:?}");
    }
    let dead = firings.iter().find(|f| f.schedule == "export").unwrap();
    let Delivery::DeadLettered { attempts, error } = &dead.delivery else {
        panic!("{:?}", dead.delivery);
    };
    assert_eq!(*attempts, 1, "a queue that does not exist is not retried");
    assert!(error.contains("no-such-queue"), "{error}");
    assert_eq!(dead.attempted_at, Some(utc("2030-06-03T12:00:00Z")));
    assert_eq!(
        envelopes(&stack)
            .await
            .values()
            .map(Vec::len)
            .sum::<usize>(),
        48
    );

    let raw = stack
        .sqs
        .receive_message()
        .queue_url(&stack.schedule_dlq_url)
        .message_attribute_names("All")
        .wait_time_seconds(2)
        .send()
        .await
        .unwrap();
    let letters = raw.messages.unwrap_or_default();
    assert_eq!(letters.len(), 1, "one dead letter");
    let envelope = Envelope::parse(letters[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(
        (envelope.job.as_str(), envelope.scheduled_for),
        ("export", utc("2030-06-03T12:00:00Z"))
    );
    let attributes = letters[0].message_attributes.clone().unwrap_or_default();
    let attribute = |name: &str| {
        attributes
            .get(name)
            .and_then(|v| v.string_value.clone())
            .unwrap_or_else(|| panic!("no {name} among {:?}", attributes.keys()))
    };
    let schedule_arn = scheduler
        .get_schedule()
        .group_name(&group)
        .name("export")
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    assert_eq!(attribute("SCHEDULE_ARN"), schedule_arn);
    assert_eq!(attribute("TARGET_ARN"), missing_queue);
    assert_eq!(attribute("RETRY_ATTEMPTS"), "0");
    assert!(
        attribute("ERROR_CODE").contains("NonExistentQueue")
            || attribute("ERROR_CODE").contains("QueueDoesNotExist"),
        "{}",
        attribute("ERROR_CODE")
    );
    assert!(attribute("ERROR_MESSAGE").contains("no-such-queue"));
    assert!(
        !attributes.contains_key("EXHAUSTED_RETRY_CONDITION"),
        "no retry was exhausted: the error is not one retries cure"
    );
}

/// FlexibleTimeWindow: each firing lands at a random time inside its window (the envelope
/// still carries the scheduled time), and one seed gives the same times again. (Every
/// firing went out on the minute.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flexible_window_spreads_firings_inside_it_reproducibly_by_seed() {
    let sdk = localstack().await;
    let stack = Stack::lane("engine-flex", StackOptions::default()).await;
    let jobs = r#"
[jobs.spread]
owner = "ops"
[jobs.spread.schedule]
expression = "cron(0 * * * ? *)"
flexible_window_minutes = 15
"#;
    let group = schedules(&sdk, &stack, jobs, &stack.arn_of(&stack.queue_url)).await;
    let run = |seed| {
        let engine = Engine::new(
            &sdk,
            EngineOptions {
                groups: vec![group.clone()],
                owner: "flex".into(),
                seed: Some(seed),
                ..EngineOptions::default()
            },
        );
        async move {
            let firings = engine
                .fast_forward(utc("2030-06-03T00:00:00Z"), utc("2030-06-04T00:00:00Z"))
                .await
                .unwrap();
            firings
                .iter()
                .map(|f| (f.attempted_at.unwrap() - f.scheduled_time).num_milliseconds())
                .collect::<Vec<i64>>()
        }
    };
    let offsets = run(42).await;
    assert_eq!(offsets.len(), 24);
    assert!(
        offsets.iter().all(|&ms| (0..900_000).contains(&ms)),
        "{offsets:?}"
    );
    let distinct: BTreeSet<i64> = offsets.iter().copied().collect();
    assert!(distinct.len() >= 20, "not spread: {offsets:?}");
    let mut again = run(42).await;
    let mut sorted = offsets.clone();
    sorted.sort();
    again.sort();
    assert_eq!(again, sorted, "one seed, the same times");
    let envelopes = envelopes(&stack).await;
    assert!(
        envelopes["spread"]
            .iter()
            .all(|t| t.ends_with(":00:00+00:00")),
        "the envelope carries the scheduled time, not the delivery time: {envelopes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_runs_end_to_end_to_a_done_record() {
    let sdk = localstack().await;
    let stack = Stack::lane("e2e", StackOptions::default()).await;
    let jobs = r#"
[jobs.flaky-sync]
owner = "crm"
payload = { fail_times = 0 }
[jobs.flaky-sync.schedule]
expression = "cron(0 12 * * ? *)"
timezone = "UTC"
"#;
    let group = schedules(&sdk, &stack, jobs, &stack.arn_of(&stack.queue_url)).await;
    let firings = engine(&sdk, &stack, &group, "engine")
        .fast_forward(utc("2030-06-03T00:00:00Z"), utc("2030-06-04T00:00:00Z"))
        .await
        .unwrap();
    assert_eq!(firings.len(), 1);
    let worker = stack.processor(stack.example_registry(), "worker", Metrics::capture().0);
    let stats = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(stats.outcomes.get("succeeded"), Some(&1));
    let record = stack
        .record("flaky-sync#2030-06-03T12:00:00Z")
        .await
        .unwrap()
        .expect("record");
    assert_eq!((record.status, record.attempt), (Status::Done, 1));
    let input = Envelope::parse(record.input.as_deref().unwrap()).unwrap();
    assert!(
        input
            .schedule_arn
            .unwrap()
            .ends_with(&format!("schedule/{group}/flaky-sync"))
    );
    let keys: BTreeSet<_> = stack
        .records()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.execution_key)
        .collect();
    assert_eq!(keys.len(), 1);
}
