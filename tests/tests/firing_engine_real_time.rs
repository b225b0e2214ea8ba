//! The firing engine in real time loses nothing: after a simulated hour down, two engines
//! deliver the missed firings within the maximum event age, once; a firing claimed by an
//! engine that died is delivered when its claim lapses; a claims table unreachable for a
//! while holds the firings back instead of dropping them; and Ctrl-C stops the engine at
//! once, even mid-delivery.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use schedkit::trigger::once_group;
use schedkit::trigger::one_off::{self, Enqueued, OneOffTarget};
use schedkit::{Clock, Envelope};
use schedkit_firing_engine::claims::{Claim, Claims};
use schedkit_firing_engine::{Engine, EngineOptions};
use schedkit_testkit::{Stack, StackOptions, localstack, proxy, unique};

use crate::firing_engine::schedules;

const TICK: Duration = Duration::from_millis(300);

fn engine_at(
    sdk: &aws_config::SdkConfig,
    claims_table: &str,
    group: &str,
    owner: &str,
    clock: Clock,
) -> Engine {
    Engine::new(
        sdk,
        EngineOptions {
            groups: vec![group.to_string(), once_group(group)],
            claims_table: Some(claims_table.to_string()),
            owner: owner.into(),
            clock,
            seed: Some(1),
        },
    )
}

/// Scheduled times of the envelopes on the queue, by how often each came.
async fn delivered(stack: &Stack) -> BTreeMap<DateTime<Utc>, usize> {
    let mut seen = BTreeMap::new();
    loop {
        let batch = stack.receive(10, Duration::from_secs(1)).await.unwrap();
        if batch.is_empty() {
            return seen;
        }
        for m in batch {
            let e = Envelope::parse(m.body.as_deref().unwrap()).unwrap();
            *seen.entry(e.scheduled_for).or_default() += 1;
        }
    }
}

/// A one-time schedule due `in_ms` from now (to the second), in `group`'s one-off group.
async fn due_soon(
    sdk: &aws_config::SdkConfig,
    stack: &Stack,
    group: &str,
    job: &str,
    in_ms: i64,
) -> (DateTime<Utc>, String) {
    let now = Utc::now();
    let due = now + chrono::Duration::milliseconds(in_ms);
    let due = due - chrono::Duration::nanoseconds(i64::from(due.timestamp_subsec_nanos()));
    let target = OneOffTarget {
        queue_url: stack.queue_url.clone(),
        queue_arn: stack.arn_of(&stack.queue_url),
        role_arn: "arn:aws:iam::000000000000:role/scheduler".into(),
        group: group.to_string(),
        dead_letter_arn: None,
    };
    // Enqueued as if from 20 minutes before, so it becomes a one-time schedule.
    let Enqueued::Scheduled { name, .. } = one_off::enqueue(
        sdk,
        &target,
        &Envelope::new(job, due),
        now - chrono::Duration::minutes(20),
    )
    .await
    .unwrap() else {
        panic!("expected a one-time schedule");
    };
    let arn = aws_sdk_scheduler::Client::new(sdk)
        .get_schedule()
        .group_name(once_group(group))
        .name(&name)
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    (due, arn)
}

/// Resolves once the claim of `key` in `table` says delivered (or after 60 s: a loaded
/// machine is slow, not wrong), after `first` has run.
async fn until_delivered(
    ddb: &aws_sdk_dynamodb::Client,
    table: &str,
    key: &str,
    first: impl std::future::Future<Output = ()>,
) {
    first.await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let claim = ddb
            .get_item()
            .table_name(table)
            .key(
                schedkit_firing_engine::claims::KEY_ATTRIBUTE,
                aws_sdk_dynamodb::types::AttributeValue::S(key.to_string()),
            )
            .send()
            .await;
        let status = claim
            .ok()
            .and_then(|c| c.item)
            .and_then(|i| i.get("status").and_then(|v| v.as_s().ok()).cloned());
        if status.as_deref() == Some("delivered") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Engine A runs, then stops; an hour and a half passes (the clock of the next engines is
/// 90 minutes ahead); engines B and C start side by side. Every 10-minute firing of the
/// downtime that is within the schedule's maximum event age (1 hour) is delivered, once;
/// the older ones are not. (A restarted engine began at "now": an hour down lost an hour.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_a_simulated_hour_down_two_engines_deliver_the_missed_firings_once() {
    let sdk = localstack().await;
    let stack = Stack::lane("catch-up", StackOptions::default()).await;
    let jobs = r#"
[jobs.every-10m]
owner = "ops"
[jobs.every-10m.schedule]
expression = "rate(10 minutes)"
start = 2020-01-01T00:05:00Z
max_event_age_seconds = 3600
"#;
    let group = schedules(&sdk, &stack, jobs, &stack.arn_of(&stack.queue_url)).await;
    let table = &stack.firings_table;

    let a = engine_at(&sdk, table, &group, "engine-a", Clock::system());
    a.run(TICK, tokio::time::sleep(Duration::from_secs(2)))
        .await
        .unwrap();
    let stopped = Utc::now();
    let down = 90 * 60 * 1000;
    let clock = Clock::offset_by_ms(down);
    let (b, c) = (
        engine_at(&sdk, table, &group, "engine-b", clock),
        engine_at(&sdk, table, &group, "engine-c", clock),
    );
    let (rb, rc) = tokio::join!(
        b.run(TICK, tokio::time::sleep(Duration::from_secs(4))),
        c.run(TICK, tokio::time::sleep(Duration::from_secs(4))),
    );
    rb.unwrap();
    rc.unwrap();
    let back = clock.now();

    let got = delivered(&stack).await;
    assert!(got.values().all(|&n| n == 1), "delivered twice: {got:?}");
    // Firings at :05, :15, ... of the downtime. Those surely inside the maximum event age
    // (scheduled more than an hour before the engines came back, with a minute's margin
    // each side for the run's own seconds) must all be there; none older.
    let phase: DateTime<Utc> = "2020-01-01T00:05:00Z".parse().unwrap();
    let period = chrono::Duration::minutes(10);
    let mut t = phase + period * ((stopped - phase).num_minutes() / 10 + 1) as i32;
    let mut expected = Vec::new();
    while t <= back {
        if t > back - chrono::Duration::minutes(59) && t < back - chrono::Duration::seconds(30) {
            expected.push(t);
        }
        t += period;
    }
    assert!(expected.len() >= 5, "{expected:?}");
    for t in &expected {
        assert!(
            got.contains_key(t),
            "missed firing {t} not delivered: {got:?}"
        );
    }
    for t in got.keys() {
        assert!(
            *t > back - chrono::Duration::minutes(61) && *t > stopped,
            "{t} is older than the maximum event age (or not missed): {got:?}"
        );
    }
}

/// An engine claims a firing and dies before delivering it: when its claim lapses, a
/// running engine delivers it. (The claim was seen as "fired elsewhere" and never looked
/// at again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_firing_claimed_by_an_engine_that_died_is_delivered_when_its_claim_lapses() {
    let sdk = localstack().await;
    let stack = Stack::lane("lapse", StackOptions::default()).await;
    let group = unique("lapse");
    // Due after the engine starts: an engine without a watermark starts from now.
    let (due, arn) = due_soon(&sdk, &stack, &group, "orphan", 4_000).await;
    let claims = Claims::new(aws_sdk_dynamodb::Client::new(&sdk), &stack.firings_table);
    let key = Claims::key(&arn, due);
    assert_eq!(
        claims
            .claim(&key, "died", Duration::from_secs(4), Utc::now())
            .await
            .unwrap(),
        Claim::Won
    );
    let engine = engine_at(
        &sdk,
        &stack.firings_table,
        &group,
        "survivor",
        Clock::system(),
    );
    let ddb = aws_sdk_dynamodb::Client::new(&sdk);
    engine
        .run(
            TICK,
            until_delivered(&ddb, &stack.firings_table, &key, async {}),
        )
        .await
        .unwrap();
    let got = delivered(&stack).await;
    assert_eq!(got.get(&due), Some(&1), "{got:?}");
}

/// The claims table cannot be reached for a while (here: it does not exist yet): the due
/// firing is held back, not dropped, and delivered once the table is there. (An error
/// mid-window dropped the rest of the window while the watermark moved on.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claims_table_unreachable_for_a_while_delays_firings_and_loses_none() {
    let sdk = localstack().await;
    let stack = Stack::lane("no-claims", StackOptions::default()).await;
    let group = unique("no-claims");
    let table = unique("late-claims");
    // Due after the engine starts (with no watermark to read, it starts from now).
    let (due, arn) = due_soon(&sdk, &stack, &group, "held-back", 4_000).await;
    let engine = engine_at(&sdk, &table, &group, "patient", Clock::system());
    let ddb = aws_sdk_dynamodb::Client::new(&sdk);
    let create = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            delivered(&stack).await.is_empty(),
            "delivered without a claim"
        );
        use aws_sdk_dynamodb::types::{
            AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
        };
        ddb.create_table()
            .table_name(&table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(schedkit_firing_engine::claims::KEY_ATTRIBUTE)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .unwrap(),
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name(schedkit_firing_engine::claims::KEY_ATTRIBUTE)
                    .key_type(KeyType::Hash)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .unwrap();
    };
    let key = Claims::key(&arn, due);
    let finished = until_delivered(&ddb, &table, &key, create);
    let run = engine.run(TICK, finished).await;
    run.unwrap();
    let got = delivered(&stack).await;
    assert_eq!(got.get(&due), Some(&1), "{got:?}");
    ddb.delete_table().table_name(&table).send().await.unwrap();
}

/// Ctrl-C while a delivery hangs (its request held 60 s on the wire): the engine returns
/// at once. (It awaited every delivery and every retry pause before looking at Ctrl-C.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_stops_at_once_on_shutdown_even_mid_delivery() {
    let sdk = localstack().await;
    let stack = Stack::lane("stop", StackOptions::default()).await;
    let group = unique("stop");
    due_soon(&sdk, &stack, &group, "hangs", 500).await;
    let proxy = proxy::to_localstack().await;
    proxy.hold_request("AmazonSQS.SendMessage", Duration::from_secs(60));
    let through_proxy = sdk.to_builder().endpoint_url(proxy.url()).build();
    let engine = engine_at(
        &through_proxy,
        &stack.firings_table,
        &group,
        "stopper",
        Clock::system(),
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(async move {
        engine
            .run(TICK, async {
                let _ = rx.await;
            })
            .await
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    let asked = Instant::now();
    tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(2), run)
        .await
        .expect("the engine did not stop within 2 s of the shutdown signal")
        .unwrap()
        .unwrap();
    assert!(asked.elapsed() < Duration::from_secs(2));
}

/// The next whole hour from now.
fn next_hour() -> DateTime<Utc> {
    use chrono::{DurationRound, TimeDelta};
    (Utc::now() + TimeDelta::hours(1))
        .duration_trunc(TimeDelta::hours(1))
        .unwrap()
}

/// The groups' scope under which engines watching `group` share their watermark.
fn scope_of(group: &str) -> String {
    let mut groups = [group.to_string(), once_group(group)];
    groups.sort();
    groups.join(",")
}

/// An SDK configuration that reaches LocalStack through `proxy`, each call given up after a
/// second with no retry: what a held request through the proxy does to an engine.
fn impatient_through(
    sdk: &aws_config::SdkConfig,
    proxy: &proxy::TcpProxy,
) -> aws_config::SdkConfig {
    sdk.to_builder()
        .endpoint_url(proxy.url())
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(1))
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .operation_timeout(Duration::from_secs(1))
                .build(),
        )
        .build()
}

/// Two engines started with the same name (two containers whose engines are both pid 1):
/// every firing is delivered once. (A claim was its owner's to take again, so each engine
/// won every claim and delivered every firing.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_engines_started_with_the_same_name_deliver_each_firing_once() {
    let sdk = localstack().await;
    let stack = Stack::lane("same-name", StackOptions::default()).await;
    let jobs = r#"
[jobs.every-10m]
owner = "ops"
[jobs.every-10m.schedule]
expression = "rate(10 minutes)"
start = 2020-01-01T00:05:00Z
"#;
    let group = schedules(&sdk, &stack, jobs, &stack.arn_of(&stack.queue_url)).await;
    let table = &stack.firings_table;
    let a = engine_at(&sdk, table, &group, "schedkit-engine/1", Clock::system());
    let b = engine_at(&sdk, table, &group, "schedkit-engine/1", Clock::system());
    // Three hours of tomorrow (sync starts a schedule on its next firing from now).
    let from = next_hour() + chrono::Duration::days(1);
    let to = from + chrono::Duration::hours(3);
    let (ra, rb) = tokio::join!(a.fast_forward(from, to), b.fast_forward(from, to));
    ra.unwrap();
    rb.unwrap();
    let got = delivered(&stack).await;
    assert_eq!(got.len(), 18, "{got:?}");
    assert!(got.values().all(|&n| n == 1), "delivered twice: {got:?}");
}

/// The first look at the schedules fails (the request is held past the client's limit)
/// when an engine comes back ten minutes after the watermark the engines recorded: the
/// firings of those ten minutes are still delivered, once the schedules can be read. (The
/// failed look found no schedule, and the watermark moved to now: the catch-up was thrown
/// away.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_first_look_at_the_schedules_keeps_the_catch_up() {
    let sdk = localstack().await;
    let stack = Stack::lane("first-look", StackOptions::default()).await;
    let jobs = r#"
[jobs.every-minute]
owner = "ops"
[jobs.every-minute.schedule]
expression = "rate(1 minute)"
start = 2020-01-01T00:00:00Z
max_event_age_seconds = 3600
"#;
    let group = schedules(&sdk, &stack, jobs, &stack.arn_of(&stack.queue_url)).await;
    let claims = Claims::new(aws_sdk_dynamodb::Client::new(&sdk), &stack.firings_table);
    let stopped = Utc::now();
    claims
        .advance_watermark(&scope_of(&group), stopped)
        .await
        .unwrap();
    let proxy = proxy::to_localstack().await;
    proxy.hold_request("GET /schedules", Duration::from_secs(3));
    // The engine comes back ten minutes later (its clock is ten minutes ahead).
    let clock = Clock::offset_by_ms(10 * 60 * 1000);
    let engine = engine_at(
        &impatient_through(&sdk, &proxy),
        &stack.firings_table,
        &group,
        "patient",
        clock,
    );
    engine
        .run(TICK, tokio::time::sleep(Duration::from_secs(6)))
        .await
        .unwrap();
    let got = delivered(&stack).await;
    let back = clock.now();
    let missed = got
        .keys()
        .filter(|t| **t > stopped && **t < back - chrono::Duration::minutes(1))
        .count();
    assert!(
        missed >= 7,
        "the missed firings were not delivered: {got:?}"
    );
    assert!(got.values().all(|&n| n == 1), "delivered twice: {got:?}");
}

/// Marking a delivered firing finished fails once (the write is held past the client's
/// limit): the engine tries the mark again and never delivers the firing a second time.
/// (The firing was taken up again on the next tick, claimed again by its own engine and
/// delivered twice.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_mark_of_a_delivered_firing_is_retried_and_the_firing_never_delivered_again() {
    let sdk = localstack().await;
    let stack = Stack::lane("failed-finish", StackOptions::default()).await;
    let group = unique("failed-finish");
    let (due, arn) = due_soon(&sdk, &stack, &group, "marked", 2_000).await;
    let proxy = proxy::to_localstack().await;
    proxy.hold_request("SET #s = :outcome", Duration::from_secs(3));
    let engine = engine_at(
        &impatient_through(&sdk, &proxy),
        &stack.firings_table,
        &group,
        "marker",
        Clock::system(),
    );
    let ddb = aws_sdk_dynamodb::Client::new(&sdk);
    let key = Claims::key(&arn, due);
    let finished = until_delivered(&ddb, &stack.firings_table, &key, async {});
    engine
        .run(TICK, async {
            finished.await;
            tokio::time::sleep(Duration::from_secs(2)).await;
        })
        .await
        .unwrap();
    let got = delivered(&stack).await;
    assert_eq!(got.get(&due), Some(&1), "{got:?}");
}

/// A delivery whose request hangs (held 25 s on the wire) is given up well before the
/// firing's claim could lapse to another engine, and tried again. (It had no limit: an
/// engine could still be delivering after its claim lapsed and another engine took it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_that_hangs_is_given_up_before_its_claim_could_lapse() {
    let sdk = localstack().await;
    let stack = Stack::lane("hung-delivery", StackOptions::default()).await;
    let jobs = r#"
[jobs.hourly]
owner = "ops"
[jobs.hourly.schedule]
expression = "rate(1 hour)"
start = 2020-01-01T00:00:00Z
"#;
    let group = schedules(&sdk, &stack, jobs, &stack.arn_of(&stack.queue_url)).await;
    let proxy = proxy::to_localstack().await;
    proxy.hold_request("AmazonSQS.SendMessage", Duration::from_secs(25));
    let engine = engine_at(
        &sdk.to_builder().endpoint_url(proxy.url()).build(),
        &stack.firings_table,
        &group,
        "hung",
        Clock::system(),
    );
    let from = next_hour() + chrono::Duration::days(1) + chrono::Duration::minutes(30);
    let firings = engine
        .fast_forward(from, from + chrono::Duration::hours(1))
        .await
        .unwrap();
    assert_eq!(firings.len(), 1, "{firings:?}");
    assert!(
        matches!(
            firings[0].delivery,
            schedkit_firing_engine::Delivery::Delivered { attempts: 2 }
        ),
        "the hung attempt was not given up: {firings:?}"
    );
}
