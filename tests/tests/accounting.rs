//! The accountant's reading of a stage's executions table (by key): six hours of
//! two hourly jobs' firings, one with no record (missed), one still RUNNING past its
//! deadline (late), the rest DONE; a job paused half-way is not expected from its pause on.

use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Timelike, Utc};
use schedkit::accounting::stage::account;
use schedkit::catalog::Catalog;
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
    localstack().await;
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

    let found = account(&store, &catalog, from, hour(6), now, &paused)
        .await
        .unwrap();
    let keys = |list: &[schedkit::accounting::stage::Unaccounted]| {
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
    assert_eq!(
        found.queries, 1,
        "the nine firings' runs read by key in one BatchGetItem, not a query per job"
    );
}

// ---- the accountant's check, on firings the local firing engine fast-forwarded ----------

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use schedkit::Status;
use schedkit::accounting::stage::{GRACE, check};
use schedkit::trigger::pause;
use schedkit_testkit::processes;
use serde_json::Value;

/// Writes `jobs` as a catalog whose schedules live in a fresh group, syncs them to target
/// the lane's queue, and returns the group and the catalog's file (for the binaries).
async fn synced(sdk: &aws_config::SdkConfig, stack: &Stack, jobs: &str) -> (String, PathBuf) {
    let queue_arn = stack.arn_of(&stack.queue_url);
    let group = crate::firing_engine::schedules(sdk, stack, jobs, &queue_arn).await;
    let text = format!("[settings]\nschedule_group = \"{group}\"\n{jobs}");
    Catalog::parse(&text, "accountant.toml").expect("the test's catalog");
    let file = std::env::temp_dir().join(format!("{}-accountant.toml", stack.name));
    std::fs::write(&file, text).unwrap();
    (group, file)
}

fn secs(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Waits until the queue is empty and every record of the table has ended.
async fn drained(stack: &Stack, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let counts = stack.counts(&stack.queue_url).await.unwrap();
        let open = stack
            .records()
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.status != Status::Done)
            .count();
        if counts == (0, 0, 0) && open == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the queue holds {counts:?}, {open} records not DONE"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn finding_keys(check: &Value, field: &str) -> BTreeSet<String> {
    check[field]
        .as_array()
        .unwrap_or_else(|| panic!("no {field}: {check}"))
        .iter()
        .map(|f| f["key"].as_str().unwrap().to_string())
        .collect()
}

const DAY: &str = r#"
[jobs.flaky-sync]
owner = "crm-team"
payload = { fail_times = 0 }
[jobs.flaky-sync.schedule]
expression = "cron(0 * * * ? *)"

[jobs.partner-export]
owner = "partner-team"
payload = { account = "acct-7" }
[jobs.partner-export.schedule]
expression = "cron(0 */4 * * ? *)"

[jobs.long-report]
owner = "data-team"
payload = { seconds = 0 }
[jobs.long-report.schedule]
expression = "cron(30 */3 * * ? *)"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_forwarded_day_reports_exactly_the_missed_firings_once_and_no_paused_ones() {
    let sdk = localstack().await;
    let stack = Stack::lane("accountant", StackOptions::default()).await;
    let (group, catalog) = synced(&sdk, &stack, DAY).await;
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);

    // partner-export's schedule disabled behind the catalog's back (not a pause).
    let export = scheduler
        .get_schedule()
        .group_name(&group)
        .name("partner-export")
        .send()
        .await
        .unwrap();
    scheduler
        .update_schedule()
        .group_name(&group)
        .name("partner-export")
        .schedule_expression(export.schedule_expression().unwrap())
        .flexible_time_window(export.flexible_time_window().unwrap().clone())
        .target(export.target().unwrap().clone())
        .state(aws_sdk_scheduler::types::ScheduleState::Disabled)
        .send()
        .await
        .unwrap();

    // A day up to now, fast-forwarded; long-report paused by an operator half-way.
    let from = Utc::now().duration_trunc(TimeDelta::hours(1)).unwrap() - TimeDelta::hours(24);
    let half = from + TimeDelta::hours(12);
    let engine = crate::firing_engine::engine(&sdk, &stack, &group, "accountant-engine");
    engine.fast_forward(from, half).await.unwrap();
    let pauses = stack.store().pauses();
    pause::pause(
        &scheduler,
        &pauses,
        &group,
        "long-report",
        "ops",
        "migrating",
        half,
    )
    .await
    .unwrap()
    .schedule
    .unwrap();
    engine.fast_forward(half, Utc::now()).await.unwrap();

    // One firing's message deleted before any worker saw it.
    let lost = format!("flaky-sync#{}", secs(from + TimeDelta::hours(5)));
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let mut deleted = false;
    while !deleted {
        let got = sqs
            .receive_message()
            .queue_url(&stack.queue_url)
            .max_number_of_messages(10)
            .visibility_timeout(60)
            .send()
            .await
            .unwrap();
        assert!(
            !got.messages().is_empty(),
            "the firing {lost} was delivered"
        );
        for m in got.messages() {
            let e = schedkit::Envelope::parse(m.body().unwrap()).unwrap();
            let key = format!("{}#{}", e.job, secs(e.scheduled_for));
            let handle = m.receipt_handle().unwrap();
            if key == lost {
                sqs.delete_message()
                    .queue_url(&stack.queue_url)
                    .receipt_handle(handle)
                    .send()
                    .await
                    .unwrap();
                deleted = true;
            } else {
                sqs.change_message_visibility()
                    .queue_url(&stack.queue_url)
                    .receipt_handle(handle)
                    .visibility_timeout(0)
                    .send()
                    .await
                    .unwrap();
            }
        }
    }
    let _worker = processes::worker(&stack, &catalog, "accountant", "worker");
    drained(&stack, Duration::from_secs(120)).await;

    // The stage's check, judging the day.
    let (metrics, found) = processes::account(&stack, &catalog, Some(&secs(from)));
    let now: DateTime<Utc> = found["now"].as_str().unwrap().parse().unwrap();
    let grace = TimeDelta::minutes(10);
    let mut missed: BTreeSet<String> = (0..=24)
        .map(|h| from + TimeDelta::hours(h))
        .filter(|t| t.hour() % 4 == 0 && *t + grace <= now)
        .map(|t| format!("partner-export#{}", secs(t)))
        .collect();
    missed.insert(lost.clone());
    assert_eq!(finding_keys(&found, "reported"), missed, "{found:#}");
    assert_eq!(finding_keys(&found, "findings"), missed);
    let by_job = processes::metric_by_job(&metrics, "Missed");
    let exports = missed
        .iter()
        .filter(|k| k.starts_with("partner-export"))
        .count() as f64;
    assert_eq!(
        by_job,
        BTreeMap::from([
            ("flaky-sync".to_string(), 1.0),
            ("partner-export".to_string(), exports)
        ]),
        "{metrics:#?}"
    );
    assert!(processes::metric_by_job(&metrics, "Late").is_empty());
    assert_eq!(
        processes::metric_by_job(&metrics, "UnaccountedJobs"),
        BTreeMap::from([("-".to_string(), 2.0)])
    );
    assert_eq!(
        processes::metric_by_job(&metrics, "AccountantChecks"),
        BTreeMap::from([("-".to_string(), 1.0)])
    );
    // long-report's firings before its pause ran; none after it is expected.
    let reports = stack
        .records()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.job == "long-report")
        .count();
    assert_eq!(
        reports, 4,
        "03:30-cadence firings in the first twelve hours"
    );

    // The next check reports nothing again; `status` and `executions list --missed` list them.
    let (metrics, again) = processes::account(&stack, &catalog, None);
    assert!(finding_keys(&again, "reported").is_empty(), "{again:#}");
    assert!(processes::metric_by_job(&metrics, "Missed").is_empty());
    assert_eq!(finding_keys(&again, "findings"), missed);
    let status = processes::console_json(&stack, &catalog, &["status"]);
    assert_eq!(finding_keys(&status["accountant"], "missed"), missed);
    let listed = processes::console_json(&stack, &catalog, &["executions", "list", "--missed"]);
    assert_eq!(finding_keys(&listed, "findings"), missed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_slower_than_its_deadline_is_reported_late_once_and_no_longer_once_done() {
    let _sdk = localstack().await;
    let stack = Stack::lane("late", StackOptions::default()).await;
    let due = Utc::now().duration_trunc(TimeDelta::minutes(1)).unwrap() - TimeDelta::minutes(1);
    let jobs = format!(
        r#"
[jobs.long-report]
owner = "data-team"
payload = {{ seconds = 20 }}
lease_seconds = 10
timeout_seconds = 40
deadline = "1m"
[jobs.long-report.schedule]
expression = "rate(1 hour)"
start = {}
"#,
        secs(due)
    );
    let catalog = std::env::temp_dir().join(format!("{}-late.toml", stack.name));
    Catalog::parse(&jobs, "late.toml").expect("the test's catalog");
    std::fs::write(&catalog, &jobs).unwrap();
    let _worker = processes::worker(&stack, &catalog, "accountant", "late-worker");
    let mut firing = schedkit::Envelope::new("long-report", due);
    firing.payload = serde_json::json!({"seconds": 20}).as_object().cloned();
    stack.send_envelope(&firing).await.unwrap();
    let key = format!("long-report#{}", secs(due));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while stack.record(&key).await.unwrap().map(|r| r.status) != Some(Status::Running) {
        assert!(tokio::time::Instant::now() < deadline, "{key} never ran");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let since = secs(due - TimeDelta::minutes(1));
    let (metrics, first) = processes::account(&stack, &catalog, Some(&since));
    assert_eq!(
        finding_keys(&first, "reported"),
        BTreeSet::from([key.clone()])
    );
    assert_eq!(first["reported"][0]["kind"], "late", "{first:#}");
    assert_eq!(
        processes::metric_by_job(&metrics, "Late"),
        BTreeMap::from([("long-report".to_string(), 1.0)])
    );
    let (metrics, second) = processes::account(&stack, &catalog, None);
    assert!(
        finding_keys(&second, "reported").is_empty(),
        "once: {second:#}"
    );
    assert!(processes::metric_by_job(&metrics, "Late").is_empty());
    let status = processes::console_json(&stack, &catalog, &["status"]);
    assert_eq!(
        finding_keys(&status["accountant"], "late"),
        BTreeSet::from([key.clone()])
    );
    assert_eq!(status["accountant"]["late"][0]["status"], "RUNNING");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while stack.record(&key).await.unwrap().map(|r| r.status) != Some(Status::Done) {
        assert!(tokio::time::Instant::now() < deadline, "{key} never ended");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (metrics, done) = processes::account(&stack, &catalog, None);
    assert!(finding_keys(&done, "findings").is_empty(), "{done:#}");
    assert!(processes::metric_by_job(&metrics, "Late").is_empty());
    let status = processes::console_json(&stack, &catalog, &["status"]);
    assert!(finding_keys(&status["accountant"], "late").is_empty());
}

const BERLIN: &str = r#"
[jobs.flaky-sync]
owner = "crm-team"
payload = { fail_times = 0 }
[jobs.flaky-sync.schedule]
expression = "cron(30 2 * * ? *)"
timezone = "Europe/Berlin"

[jobs.long-report]
owner = "data-team"
payload = { seconds = 0 }
[jobs.long-report.schedule]
expression = "cron(0 * * * ? *)"
timezone = "Europe/Berlin"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_berlins_clock_changes_nothing_is_missed_or_expected_twice() {
    let sdk = localstack().await;
    let stack = Stack::lane("dst", StackOptions::default()).await;
    let (group, file) = synced(&sdk, &stack, BERLIN).await;
    let catalog = Catalog::load(&file).unwrap();
    let engine = crate::firing_engine::engine(&sdk, &stack, &group, "dst-engine");
    let _worker = processes::worker(&stack, &file, "accountant", "dst-worker");
    let store = stack.store();
    // The nights of 29 March (02:00 → 03:00) and 25 October (03:00 → 02:00), 2026: two
    // days around each. 02:30 does not exist on 29 March (no firing); on 25 October it
    // happens twice and fires once.
    let mut runs = 0;
    for (from, to, nightly) in [
        ("2026-03-28T00:00:00Z", "2026-03-30T00:00:00Z", 1),
        ("2026-10-24T00:00:00Z", "2026-10-26T00:00:00Z", 2),
    ] {
        let (from, to): (DateTime<Utc>, DateTime<Utc>) =
            (from.parse().unwrap(), to.parse().unwrap());
        let fired: Vec<String> = engine
            .fast_forward(from, to)
            .await
            .unwrap()
            .into_iter()
            .map(|f| format!("{}#{}", f.schedule, secs(f.scheduled_time)))
            .collect();
        let expected: Vec<String> =
            schedkit::accounting::expected(&catalog, from, to, GRACE, |_, _| false)
                .into_iter()
                .map(|e| e.key)
                .collect();
        let unique: BTreeSet<&String> = expected.iter().collect();
        assert_eq!(unique.len(), expected.len(), "nothing expected twice");
        assert_eq!(
            unique,
            fired.iter().collect::<BTreeSet<_>>(),
            "expected exactly what the scheduler fired"
        );
        assert_eq!(
            fired
                .iter()
                .filter(|k| k.starts_with("flaky-sync#"))
                .count(),
            nightly
        );
        runs += fired.len();
        drained(&stack, Duration::from_secs(120)).await;
        // The check as it would run at the end of those days, judging them.
        let found = check(&store, &catalog, to, Some(from), true).await.unwrap();
        assert!(found.reported.is_empty(), "no false missed: {found:#?}");
        assert!(found.findings.is_empty(), "{found:#?}");
    }
    assert_eq!(
        stack.records().await.unwrap().len(),
        runs,
        "one run per firing"
    );
}

// ---- holes found by the adversarial review, each shown first ------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_steps_record_does_not_stand_for_its_jobs_own_firing() {
    localstack().await;
    let stack = Stack::lane("acct-step", StackOptions::default()).await;
    let store = stack.store();
    let catalog = Catalog::parse(CATALOG, "catalog.toml").unwrap();
    let now = Utc::now();
    let at = now.duration_trunc(TimeDelta::hours(1)).unwrap() - TimeDelta::hours(2);
    // A chain's step running `hourly` for a chain fired at the same hour: its record has
    // the job and the time, under the step's key.
    let scheduled = secs(at);
    let claim = ClaimRequest {
        key: format!("month-end#{scheduled}#report"),
        job: "hourly".into(),
        scheduled_for: scheduled.clone(),
        payload_hash: "h".into(),
        input: "{}".into(),
        message_id: None,
        owner: "w:1".into(),
        now: at,
        lease: Duration::from_secs(60),
        retention: Duration::from_secs(86_400),
        redrive: None,
    };
    let ClaimOutcome::Claimed { record, .. } = store.claim(&claim).await.unwrap() else {
        panic!("not claimed")
    };
    let done = Finish::Succeeded {
        result: serde_json::json!(null),
    };
    store.finish(&record, &done, at).await.unwrap();
    let found = account(&store, &catalog, at, at + TimeDelta::minutes(1), now, &[])
        .await
        .unwrap();
    let missed: Vec<&str> = found
        .missed
        .iter()
        .map(|u| u.key.as_str())
        .filter(|k| k.starts_with("hourly#"))
        .collect();
    assert_eq!(missed, [format!("hourly#{scheduled}")], "{found:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_write_sent_again_after_its_answer_was_lost_counts_as_written() {
    localstack().await;
    let stack = Stack::lane("acct-retry", StackOptions::default()).await;
    let store = stack.store();
    let ledger = schedkit::accounting::ledger::Ledger {
        checks: 1,
        checked_to: Some(Utc::now()),
        ..Default::default()
    };
    assert!(store.put_ledger(&ledger, 0).await.unwrap());
    // The same write again (the SDK's retry of a write whose answer was lost): written.
    assert!(store.put_ledger(&ledger, 0).await.unwrap());
    // Another check's, on the ledger as it was: refused.
    let other = schedkit::accounting::ledger::Ledger {
        checks: 1,
        checked_to: Some(Utc::now() + TimeDelta::seconds(1)),
        ..Default::default()
    };
    assert!(!store.put_ledger(&other, 0).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_long_deadline_does_not_make_every_jobs_span_long() {
    localstack().await;
    let stack = Stack::lane("acct-span", StackOptions::default()).await;
    let store = stack.store();
    let catalog = Catalog::parse(
        r#"
[jobs.often]
owner = "data"
deadline = "2m"
timeout_seconds = 60
[jobs.often.schedule]
expression = "rate(5 minutes)"
start = 2026-01-01T00:00:00Z

[jobs.daily]
owner = "data"
deadline = "1d"
[jobs.daily.schedule]
expression = "rate(1 day)"
start = 2026-01-01T00:00:00Z
"#,
        "span.toml",
    )
    .unwrap();
    let t0 = Utc::now().duration_trunc(TimeDelta::minutes(5)).unwrap() + TimeDelta::minutes(1);
    check(&store, &catalog, t0, None, true).await.unwrap();
    let next = check(&store, &catalog, t0 + TimeDelta::minutes(5), None, true)
        .await
        .unwrap();
    // `often`'s firing whose window ended in these 5 minutes, `daily`'s if its deadline
    // did: not a day of `often`'s.
    assert!(next.expected <= 3, "{next:#?}");
}

/// The failure storm counts jobs failing now: a check that catches up on a day (after an
/// outage) does not count the day's failures, only those of the last ten minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_storm_counts_the_jobs_failing_now_not_a_caught_up_days() {
    localstack().await;
    let stack = Stack::lane("acct-storm", StackOptions::default()).await;
    let store = stack.store();
    let catalog = Catalog::parse("[jobs.a]\nowner = \"data\"\n", "storm.toml").unwrap();
    let now = Utc::now();
    for (name, at) in [
        ("yesterday-1", now - TimeDelta::hours(20)),
        ("yesterday-2", now - TimeDelta::hours(19)),
        ("just-now", now - TimeDelta::minutes(2)),
    ] {
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
            panic!("{name} not claimed")
        };
        let failed = Finish::Failed {
            error: "down".into(),
        };
        store.finish(&record, &failed, at).await.unwrap();
    }
    let caught_up = check(&store, &catalog, now, Some(now - TimeDelta::days(1)), false)
        .await
        .unwrap();
    assert_eq!(
        caught_up.failed_jobs,
        ["just-now".to_string()].into(),
        "{caught_up:#?}"
    );
}

/// One hourly job, due DONE within 20 minutes.
const HOURLY: &str = r#"
[jobs.hourly]
owner = "data"
deadline = "20m"
[jobs.hourly.schedule]
expression = "rate(1 hour)"
start = 2026-01-01T00:00:00Z
"#;

/// A pause and a resume between two checks (issue 38, defect 4): the firings the pause
/// withheld are not missed, and a firing after the resume that never ran is. The resume
/// removed the pause the accountant read, so every withheld firing once read as missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_and_resume_between_two_checks_withhold_its_firings_and_nothing_else() {
    localstack().await;
    let stack = Stack::lane("acct-resume", StackOptions::default()).await;
    let store = stack.store();
    let catalog = Catalog::parse(HOURLY, "resume.toml").unwrap();
    let h0 = Utc::now().duration_trunc(TimeDelta::hours(1)).unwrap() - TimeDelta::hours(4);
    let hour = |h: i64| h0 + TimeDelta::hours(h);
    check(&store, &catalog, h0 + TimeDelta::minutes(5), None, true)
        .await
        .unwrap();
    let pauses = store.pauses();
    let pause = PauseRecord {
        job: "hourly".into(),
        by: "ops".into(),
        at: (hour(1) - TimeDelta::minutes(10)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        reason: "partner down".into(),
    };
    pauses.pause(&pause).await.unwrap();
    let ended = pauses
        .resume("hourly", hour(2) + TimeDelta::minutes(30))
        .await
        .unwrap();
    assert_eq!(ended, Some(pause));
    let second = check(
        &store,
        &catalog,
        hour(3) + TimeDelta::minutes(20),
        None,
        true,
    )
    .await
    .unwrap();
    let reported: Vec<String> = second.reported.iter().map(|f| f.key.clone()).collect();
    let key = |h: i64| {
        format!(
            "hourly#{}",
            hour(h).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    };
    assert_eq!(
        reported,
        [key(3)],
        "01:00 and 02:00 were withheld; 03:00 missed"
    );
}

/// The stage's check wrote its ledger and its worker was killed before the metrics went
/// out (or the write's answer was lost and the check failed): the next check found the
/// firing judged, and a missed firing was never reported. Now the written ledger keeps its
/// report unsent until a check says it sent it, and the next check sends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_whose_check_stopped_before_sending_it_is_sent_by_the_next_check() {
    localstack().await;
    let stack = Stack::lane("acct-unsent", StackOptions::default()).await;
    let store = stack.store();
    let catalog = Catalog::parse(HOURLY, "unsent.toml").unwrap();
    let h0 = Utc::now().duration_trunc(TimeDelta::hours(1)).unwrap() - TimeDelta::hours(3);
    check(&store, &catalog, h0 + TimeDelta::minutes(5), None, true)
        .await
        .unwrap();
    // The check that finds the firing missed dies as it is about to send its report.
    let missed_at = h0 + TimeDelta::hours(1) + TimeDelta::minutes(35);
    let killed = tokio::spawn({
        let (store, catalog) = (store.clone(), catalog.clone());
        async move {
            schedkit::accounting::stage::check_and_send(&store, &catalog, missed_at, None, |_| {
                panic!("killed before its metrics went out")
            })
            .await
        }
    })
    .await;
    assert!(killed.is_err(), "the check was killed");
    assert_eq!(
        store.ledger().await.unwrap().unwrap().checks,
        2,
        "its ledger was written"
    );
    let next = check(
        &store,
        &catalog,
        missed_at + TimeDelta::minutes(5),
        None,
        true,
    )
    .await
    .unwrap();
    let key = format!(
        "hourly#{}",
        (h0 + TimeDelta::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    let reported: Vec<&str> = next.reported.iter().map(|f| f.key.as_str()).collect();
    assert_eq!(reported, [key.as_str()]);
    // Said sent: the check after reports nothing again.
    let after = check(
        &store,
        &catalog,
        missed_at + TimeDelta::minutes(10),
        None,
        true,
    )
    .await
    .unwrap();
    assert!(after.reported.is_empty(), "{:?}", after.reported);
}
