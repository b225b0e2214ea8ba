//! Pausing a job: by hand (`jobs pause` / `jobs resume`), and by the worker after the job's
//! `pause_after_failures` consecutive FAILED runs. Either way the schedule is DISABLED
//! through the Scheduler API, `status` says who paused it, when and why, and `jobs resume`
//! enables it again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use aws_sdk_scheduler::types::ScheduleState;
use chrono::{DateTime, Utc};
use schedkit::{Ctx, Envelope, JobError, JobPolicy, Jobs, Metrics, Registry, RetryPolicy};
use schedkit_testkit::{Stack, StackOptions, localstack, metric_total, unique};
use serde_json::json;

use super::cli::{schedkit, stderr, stdout};

/// The schedule's state, read from the Scheduler API.
pub(crate) async fn state_of(
    scheduler: &aws_sdk_scheduler::Client,
    group: &str,
    job: &str,
) -> ScheduleState {
    scheduler
        .get_schedule()
        .group_name(group)
        .name(job)
        .send()
        .await
        .unwrap()
        .state
        .unwrap()
}

/// Runs `schedkit --stage <stage> args`, asserting it succeeds; its stdout.
fn cmd(stage: &str, args: &[&str]) -> String {
    let mut all = vec!["--stage", stage];
    all.extend_from_slice(args);
    let out = schedkit(&all);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

fn audit_log() -> String {
    std::fs::read_to_string(std::env::temp_dir().join("schedkit-cli-test-audit.jsonl")).unwrap()
}

/// `jobs pause` disables the job's schedule through the Scheduler API and records who,
/// when and why: `status` and `jobs` show it, a sync keeps it disabled, `jobs resume`
/// enables it again; both audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_job_stays_paused_across_a_sync_until_resumed_and_status_says_why() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("pause"), StackOptions::default())
        .await
        .unwrap();
    let stage = stack.name.clone();
    let cmd = |args: &[&str]| cmd(&stage, args);
    cmd(&["schedules", "sync", "--yes"]);
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let state = || state_of(&scheduler, &stack.schedule_group, "long-report");
    assert_eq!(state().await, ScheduleState::Enabled);

    let paused = cmd(&[
        "jobs",
        "pause",
        "long-report",
        "--reason",
        "the report database is migrating",
    ]);
    assert!(paused.starts_with("long-report: paused"), "{paused}");
    assert_eq!(state().await, ScheduleState::Disabled);
    let status = cmd(&["status"]);
    assert!(
        status.contains("paused         long-report since ")
            && status.contains(": the report database is migrating"),
        "{status}"
    );
    assert!(
        cmd(&["jobs"]).contains("PAUSED since "),
        "jobs does not say it is paused"
    );

    let again = cmd(&["schedules", "sync", "--yes"]);
    assert!(
        again.contains("nothing to do"),
        "a sync would undo the pause: {again}"
    );
    assert_eq!(state().await, ScheduleState::Disabled);

    let resumed = cmd(&["jobs", "resume", "long-report"]);
    assert!(
        resumed.contains("resumed (schedule ENABLED); it was paused by "),
        "{resumed}"
    );
    assert_eq!(state().await, ScheduleState::Enabled);
    assert!(!cmd(&["status"]).contains("paused "));
    let audit = audit_log();
    assert!(audit.contains("\"jobs pause\"") && audit.contains("\"jobs resume\""));
}

/// `partner-export` as the worker would run it, failing for good (one attempt) while
/// `failing` is set, with the shipped catalog's `pause_after_failures = 3`.
fn registry(failing: Arc<AtomicBool>) -> Registry {
    let policy = JobPolicy {
        retry: RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        },
        pause_after_failures: std::num::NonZeroU32::new(3),
        ..JobPolicy::default()
    };
    Jobs::new()
        .add("partner-export", move |_ctx: Ctx| {
            let failing = failing.load(Ordering::SeqCst);
            async move {
                if failing {
                    Err(JobError::permanent(
                        "export rejected by the partner API: 422 account blocked",
                    ))
                } else {
                    Ok(json!({"exported": true}))
                }
            }
        })
        .bind_policies(|_| policy.clone())
}

/// After three FAILED runs in a row the worker pauses the job: its schedule DISABLED
/// through the Scheduler API, the pause recorded by `worker` with the failures, one
/// `AutoPaused`. A DONE run in between starts the count again, and a failure delivered twice
/// counts once. `status` shows the pause and why; `jobs resume` enables the schedule and
/// forgets the failures (one more failure pauses nothing), audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_three_failed_runs_in_a_row_the_worker_pauses_the_job_until_it_is_resumed() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("autopause"), StackOptions::default())
        .await
        .unwrap();
    let stage = stack.name.clone();
    cmd(&stage, &["schedules", "sync", "--yes"]);
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let state = || state_of(&scheduler, &stack.schedule_group, "partner-export");
    let failing = Arc::new(AtomicBool::new(true));
    let (metrics, lines) = Metrics::capture();
    let worker = stack.processor(registry(failing.clone()), "w", metrics);
    let base: DateTime<Utc> = "2026-12-01T09:30:00Z".parse().unwrap();
    let run =
        |day: i64| Envelope::new("partner-export", base + chrono::Duration::days(day)).to_json();
    let deliver = |bodies: Vec<String>| {
        let (stack, worker) = (&stack, &worker);
        async move {
            stack
                .send_all(bodies.iter().map(String::as_str))
                .await
                .unwrap();
            stack.run_until_drained(std::slice::from_ref(worker)).await;
        }
    };

    // Two failures (the first delivered twice), a success, two failures: never three in a row.
    deliver(vec![run(0)]).await;
    deliver(vec![run(0), run(1)]).await;
    assert_eq!(
        state().await,
        ScheduleState::Enabled,
        "the same failure counted twice"
    );
    failing.store(false, Ordering::SeqCst);
    deliver(vec![run(2)]).await;
    failing.store(true, Ordering::SeqCst);
    deliver(vec![run(3), run(4)]).await;
    assert_eq!(
        state().await,
        ScheduleState::Enabled,
        "a success did not end the streak"
    );
    assert_eq!(metric_total(&lines, "AutoPaused"), 0.0);

    // The third in a row.
    deliver(vec![run(5)]).await;
    assert_eq!(state().await, ScheduleState::Disabled);
    assert_eq!(metric_total(&lines, "AutoPaused"), 1.0);
    let status = cmd(&stage, &["status"]);
    let paused = status
        .lines()
        .find(|l| l.starts_with("paused "))
        .unwrap_or_else(|| panic!("status shows no pause: {status}"));
    assert!(
        paused.starts_with("paused         partner-export since ")
            && paused.contains(" by worker: 3 consecutive runs FAILED (pause_after_failures = 3); the last, `partner-export#2026-12-06T09:30:00Z`: export rejected by the partner API: 422 account blocked"),
        "{paused}"
    );

    // A failure while paused (a run fired by hand) keeps the pause as it was.
    deliver(vec![run(6)]).await;
    assert_eq!(metric_total(&lines, "AutoPaused"), 1.0);
    assert!(
        cmd(&stage, &["status"]).contains(paused),
        "the pause was rewritten"
    );

    // A second operator resumes it: another identity (an assumed role), the same stage.
    let bob = bob().await;
    let resume = [
        "--stage",
        stage.as_str(),
        "jobs",
        "resume",
        "partner-export",
    ];
    let out = schedkit_as(&bob, &resume);
    assert!(out.status.success(), "{}", stderr(&out));
    let resumed = stdout(&out);
    assert!(
        resumed.contains("resumed (schedule ENABLED); it was paused by worker"),
        "{resumed}"
    );
    assert_eq!(state().await, ScheduleState::Enabled);
    assert!(!cmd(&stage, &["status"]).contains("paused "));
    // The failures before the resume are forgotten: one more is the first of a new streak.
    deliver(vec![run(7)]).await;
    assert_eq!(state().await, ScheduleState::Enabled);
    assert_eq!(metric_total(&lines, "AutoPaused"), 1.0);
    let audit = audit_log();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"jobs resume\"") && l.contains("partner-export")),
        "{audit}"
    );
    // The stage's own trail has both operators and the worker, in order: the first
    // operator's sync, the worker's pause, the second operator's resume.
    let trail: serde_json::Value =
        serde_json::from_str(&cmd(&stage, &["audit", "--output", "json"])).unwrap();
    let entries: Vec<(String, String, String)> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let text = |f: &str| e[f].as_str().unwrap_or_default().to_string();
            (text("what"), text("phase"), text("who"))
        })
        .collect();
    let position = |what: &str, phase: &str| {
        entries
            .iter()
            .position(|(w, p, _)| w == what && p == phase)
            .unwrap_or_else(|| panic!("no {what} {phase} in {entries:#?}"))
    };
    let (sync, paused, resumed) = (
        position("schedules sync", "end"),
        position("auto-pause", "end"),
        position("jobs resume", "end"),
    );
    // Newest first: the resume, the worker's pause, the sync.
    assert!(resumed < paused && paused < sync, "{entries:#?}");
    assert_eq!(entries[paused].2, "worker");
    assert_eq!(
        entries[resumed].2,
        "arn:aws:sts::000000000000:assumed-role/operator/bob"
    );
    assert_ne!(
        entries[sync].2, entries[resumed].2,
        "two operators: {entries:#?}"
    );
    let bobs: serde_json::Value =
        serde_json::from_str(&cmd(&stage, &["audit", "--by", "bob", "--output", "json"])).unwrap();
    assert!(
        bobs.as_array()
            .unwrap()
            .iter()
            .all(|e| e["who"].as_str().unwrap().contains("bob")),
        "{bobs:#}"
    );
}

/// Credentials of a second operator, `bob` (a role assumed on LocalStack).
async fn bob() -> aws_sdk_sts::types::Credentials {
    let sts = aws_sdk_sts::Client::new(&localstack().await);
    sts.assume_role()
        .role_arn("arn:aws:iam::000000000000:role/operator")
        .role_session_name("bob")
        .send()
        .await
        .unwrap()
        .credentials
        .unwrap()
}

/// `schedkit args` run with `who`'s credentials.
fn schedkit_as(who: &aws_sdk_sts::types::Credentials, args: &[&str]) -> std::process::Output {
    super::cli::command(args)
        .env("AWS_ACCESS_KEY_ID", who.access_key_id())
        .env("AWS_SECRET_ACCESS_KEY", who.secret_access_key())
        .env("AWS_SESSION_TOKEN", who.session_token())
        .output()
        .expect("schedkit runs")
}

/// A lane of the shared stage with `job`'s schedule in its group, ENABLED.
async fn scheduled_lane(sdk: &schedkit::aws::SdkConfig, job: &str) -> Stack {
    let stack = Stack::lane("pause-race", StackOptions::default()).await;
    stack.create_schedule(sdk, job).await.unwrap();
    stack
}

/// A resume whose record cannot be written (its table is out of reach) changes nothing:
/// the job stays paused, its schedule DISABLED. (The schedule was enabled first and the
/// record kept: the next sync disabled it again, and `status` said paused meanwhile.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_that_cannot_write_its_record_leaves_the_job_paused() {
    let sdk = localstack().await;
    let job = unique("nightly");
    let stack = scheduled_lane(&sdk, &job).await;
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let pauses = schedkit::store::Pauses::for_table(&sdk, &stack.table);
    let group = &stack.schedule_group;
    let now = Utc::now();
    schedkit::trigger::pause::pause(&scheduler, &pauses, group, &job, "ops", "migrating", now)
        .await
        .unwrap();
    assert_eq!(
        state_of(&scheduler, group, &job).await,
        ScheduleState::Disabled
    );
    let unreachable = schedkit::store::Pauses::for_table(&sdk, unique("no-such-table"));
    let resumed =
        schedkit::trigger::pause::resume(&scheduler, &unreachable, group, &job, now).await;
    assert!(resumed.is_err(), "{resumed:?}");
    assert_eq!(
        state_of(&scheduler, group, &job).await,
        ScheduleState::Disabled,
        "a resume that recorded nothing enabled the schedule"
    );
    assert!(pauses.get(&job).await.unwrap().is_some());
}

/// A second pause (the worker's, or another operator's) keeps the first one's who and why.
/// (It overwrote them: the operator's reason was lost to "3 consecutive runs FAILED".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_never_overwrites_the_pause_already_there() {
    let sdk = localstack().await;
    let job = unique("nightly");
    let stack = scheduled_lane(&sdk, &job).await;
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let pauses = schedkit::store::Pauses::for_table(&sdk, &stack.table);
    let group = &stack.schedule_group;
    let now = Utc::now();
    schedkit::trigger::pause::pause(
        &scheduler,
        &pauses,
        group,
        &job,
        "arn:aws:iam::000000000000:user/ops",
        "the partner is migrating until Monday",
        now,
    )
    .await
    .unwrap();
    let _ = schedkit::trigger::pause::pause(
        &scheduler,
        &pauses,
        group,
        &job,
        "worker",
        "3 consecutive runs FAILED",
        now,
    )
    .await
    .unwrap();
    let kept = pauses.get(&job).await.unwrap().unwrap();
    assert_eq!(
        (kept.by.as_str(), kept.reason.as_str()),
        (
            "arn:aws:iam::000000000000:user/ops",
            "the partner is migrating until Monday"
        )
    );
    assert_eq!(
        state_of(&scheduler, group, &job).await,
        ScheduleState::Disabled
    );
}

/// A pause whose schedule update is slow on the wire (held 3 s) while an operator resumes
/// the job meanwhile: once both return, the schedule agrees with the record (ENABLED with
/// no pause, or DISABLED with one). (The late DISABLED landed after the resume: the job
/// stayed disabled with no pause on record, so nothing said why and sync did not fix it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_and_a_resume_at_once_leave_the_schedule_agreeing_with_the_record() {
    let sdk = localstack().await;
    let job = unique("nightly");
    let stack = scheduled_lane(&sdk, &job).await;
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let pauses = schedkit::store::Pauses::for_table(&sdk, &stack.table);
    let group = stack.schedule_group.clone();
    let proxy = schedkit_testkit::proxy::to_localstack().await;
    proxy.hold_request("DISABLED", std::time::Duration::from_secs(3));
    let slow = aws_sdk_scheduler::Client::new(&sdk.to_builder().endpoint_url(proxy.url()).build());
    let now = Utc::now();
    let pausing = {
        let (pauses, group, job) = (pauses.clone(), group.clone(), job.clone());
        tokio::spawn(async move {
            let _ = schedkit::trigger::pause::pause(
                &slow,
                &pauses,
                &group,
                &job,
                "worker",
                "3 consecutive runs FAILED",
                now,
            )
            .await;
        })
    };
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    schedkit::trigger::pause::resume(&scheduler, &pauses, &group, &job, now)
        .await
        .unwrap();
    pausing.await.unwrap();
    let paused = pauses.get(&job).await.unwrap().is_some();
    let state = state_of(&scheduler, &group, &job).await;
    assert_eq!(
        state == ScheduleState::Disabled,
        paused,
        "the schedule is {state:?} and the record says paused = {paused}"
    );
}

/// A stage deployed before pauses moved to the job's item kept a pause under `pause#<job>`:
/// it still counts (status, jobs and sync keep the job paused), no later pause is written
/// over it (an operator's or the worker's), and a resume removes it.
/// An execution record under such a key is never taken for a pause, nor removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_an_earlier_version_recorded_still_counts_until_resumed() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let sdk = localstack().await;
    let job = unique("nightly");
    let stack = scheduled_lane(&sdk, &job).await;
    let s = |v: &str| AttributeValue::S(v.to_string());
    stack
        .ddb
        .put_item()
        .table_name(&stack.table)
        .item("execution_key", s(&format!("pause#{job}")))
        .item("job", s(&job))
        .item("by", s("arn:aws:iam::000000000000:user/ops"))
        .item("at", s("2026-11-30T10:00:00Z"))
        .item("reason", s("paused before the upgrade"))
        .send()
        .await
        .unwrap();
    let pauses = schedkit::store::Pauses::for_table(&sdk, &stack.table);
    let kept = pauses.get(&job).await.unwrap().expect("the earlier pause");
    assert_eq!(kept.reason, "paused before the upgrade");
    // Nobody's pause is written over it: another operator's, or the worker's.
    let mut over = kept.clone();
    over.by = "worker".into();
    over.reason = "2 consecutive runs FAILED".into();
    use schedkit::store::Paused;
    assert_eq!(
        pauses.pause(&over).await.unwrap(),
        Paused::Already(kept.clone())
    );
    assert_eq!(
        pauses.pause_after_streak(&over, 0).await.unwrap(),
        Paused::Already(kept.clone())
    );
    assert_eq!(pauses.get(&job).await.unwrap().as_ref(), Some(&kept));
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let ended = schedkit::trigger::pause::resume(
        &scheduler,
        &pauses,
        &stack.schedule_group,
        &job,
        Utc::now(),
    )
    .await
    .unwrap();
    assert_eq!(
        ended.decided.map(|p| p.reason).as_deref(),
        Some("paused before the upgrade")
    );
    assert!(pauses.get(&job).await.unwrap().is_none());
    // An execution record under a key of that shape is a record, not a pause.
    let other = unique("report");
    stack
        .put_record(&schedkit::ExecutionRecord {
            execution_key: format!("pause#{other}"),
            job: "record-invoice".into(),
            scheduled_for: "2026-12-01T00:00:00Z".into(),
            status: schedkit::Status::Done,
            attempt: 1,
            attempt_base: 0,
            owner: Some("w:1".into()),
            lease_expires_at: None,
            payload_hash: "h".into(),
            input: None,
            created_at: "2026-12-01T00:00:00.000Z".into(),
            updated_at: "2026-12-01T00:00:00.000Z".into(),
            started_at: None,
            finished_at: None,
            duration_ms: None,
            last_error: None,
            history: Vec::new(),
            result: None,
            message_id: None,
            cancelled: None,
            skipped: None,
            late_attempt: None,
            waiting_since: None,
            expires_at: Utc::now().timestamp() + 3600,
        })
        .await
        .unwrap();
    assert!(pauses.get(&other).await.unwrap().is_none());
    let _ = pauses.resume(&other, Utc::now()).await.unwrap();
    assert!(
        stack
            .record(&format!("pause#{other}"))
            .await
            .unwrap()
            .is_some()
    );
}

/// A sync planned before a pause (it read no pause) and applied after it (its write of the
/// schedule says ENABLED): the schedule ends DISABLED, as the record says. (The sync's
/// write undid the pause, and nothing set it again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_planned_before_a_pause_leaves_the_schedule_as_the_pause_record_says() {
    use schedkit::trigger::sync;
    let sdk = localstack().await;
    let stack = Stack::lane("sync-pause", StackOptions::default()).await;
    let (group, job) = (unique("sync-pause"), unique("nightly"));
    let text = format!(
        "[settings]\nschedule_group = \"{group}\"\n[jobs.{job}]\nowner = \"ops\"\n[jobs.{job}.schedule]\nexpression = \"rate(1 hour)\"\n"
    );
    let catalog = schedkit::catalog::Catalog::parse(&text, "sync-pause.toml").unwrap();
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let targets = sync::SyncTargets {
        queue_arn: stack.arn_of(&stack.queue_url),
        host_queue_arn: None,
        urgent_queues: false,
        role_arn: stack.scheduler_role_arn.clone(),
        dead_letter_arn: None,
    };
    let pauses = schedkit::store::Pauses::for_table(&sdk, &stack.table);
    let plan = sync::plan_keeping_paused(&scheduler, &catalog, &targets, &Default::default())
        .await
        .unwrap();
    // The pause lands between the plan and its writes.
    let pause = schedkit::store::PauseRecord {
        job: job.clone(),
        by: "ops".into(),
        at: "2026-12-01T00:00:00Z".into(),
        reason: "the partner is down".into(),
    };
    pauses.pause(&pause).await.unwrap();
    sync::apply_keeping_pauses(&scheduler, &pauses, &catalog, &plan, &Default::default())
        .await
        .unwrap();
    assert_eq!(
        state_of(&scheduler, &group, &job).await,
        ScheduleState::Disabled
    );
}

/// A catalog of two scheduled jobs in a fresh group, its targets on a fresh stack.
async fn two_jobs(
    name: &str,
    description: &str,
) -> (
    Stack,
    String,
    [String; 2],
    schedkit::trigger::sync::SyncTargets,
    String,
) {
    let stack = Stack::lane(name, StackOptions::default()).await;
    let (group, a, b) = (unique(name), unique("a"), unique("b"));
    let text = format!(
        "[settings]\nschedule_group = \"{group}\"\n[jobs.{a}]\nowner = \"ops\"\ndescription = \"{description}\"\n[jobs.{a}.schedule]\nexpression = \"rate(1 hour)\"\n[jobs.{b}]\nowner = \"ops\"\n[jobs.{b}.schedule]\nexpression = \"rate(1 hour)\"\n"
    );
    let targets = schedkit::trigger::sync::SyncTargets {
        queue_arn: stack.arn_of(&stack.queue_url),
        host_queue_arn: None,
        urgent_queues: false,
        role_arn: stack.scheduler_role_arn.clone(),
        dead_letter_arn: None,
    };
    (stack, group, [a, b], targets, text)
}

/// A sync whose other write fails (a schedule created since the plan: its Create is
/// refused) still keeps the pause that landed between its plan and its writes: the
/// schedule it updated ends DISABLED, as the record says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_with_a_failed_write_still_keeps_a_pause_that_landed_meanwhile() {
    use schedkit::trigger::sync;
    let sdk = localstack().await;
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let (stack, group, [a, b], targets, first) = two_jobs("sync-fail-pause", "v1").await;
    let pauses = schedkit::store::Pauses::for_table(&sdk, &stack.table);
    // A is synced alone first; then the catalog changes A and adds B.
    let only_a = first
        .split(&format!("[jobs.{b}]"))
        .next()
        .unwrap()
        .to_string();
    let catalog = schedkit::catalog::Catalog::parse(&only_a, "c.toml").unwrap();
    let plan = sync::plan_keeping_paused(&scheduler, &catalog, &targets, &Default::default())
        .await
        .unwrap();
    sync::apply(&scheduler, &plan).await.unwrap();
    let catalog = schedkit::catalog::Catalog::parse(&first.replace("v1", "v2"), "c.toml").unwrap();
    let plan = sync::plan_keeping_paused(&scheduler, &catalog, &targets, &Default::default())
        .await
        .unwrap();
    assert_eq!(plan.changes.len(), 2, "{plan}");
    // Meanwhile: A is paused, and B created by someone else (the plan's Create will fail).
    pauses
        .pause(&schedkit::store::PauseRecord {
            job: a.clone(),
            by: "ops".into(),
            at: "2026-12-05T00:00:00Z".into(),
            reason: "the partner is down".into(),
        })
        .await
        .unwrap();
    let mut clash = plan.clone();
    clash
        .changes
        .retain(|c| matches!(c, sync::Change::Create { .. }));
    clash.create_group = false;
    sync::apply(&scheduler, &clash).await.unwrap();
    let applied =
        sync::apply_keeping_pauses(&scheduler, &pauses, &catalog, &plan, &Default::default()).await;
    assert!(applied.is_err(), "B's create was refused: {applied:?}");
    assert_eq!(
        state_of(&scheduler, &group, &a).await,
        ScheduleState::Disabled
    );
}

/// A pause whose read-modify-write of the State carried the schedule from before the sync
/// (written after the sync's update): the sync writes its config again, DISABLED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_that_wrote_the_old_config_over_the_syncs_update_is_undone_but_its_state_kept() {
    use schedkit::trigger::sync;
    let sdk = localstack().await;
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let (stack, group, [a, _], targets, text) = two_jobs("sync-old-config", "v1").await;
    let pauses = schedkit::store::Pauses::for_table(&sdk, &stack.table);
    let v1 = schedkit::catalog::Catalog::parse(&text, "c.toml").unwrap();
    let plan = sync::plan_keeping_paused(&scheduler, &v1, &targets, &Default::default())
        .await
        .unwrap();
    sync::apply(&scheduler, &plan).await.unwrap();
    let old = scheduler
        .get_schedule()
        .group_name(&group)
        .name(&a)
        .send()
        .await
        .unwrap();
    let v2 = schedkit::catalog::Catalog::parse(&text.replace("v1", "v2"), "c.toml").unwrap();
    let plan = sync::plan_keeping_paused(&scheduler, &v2, &targets, &Default::default())
        .await
        .unwrap();
    pauses
        .pause(&schedkit::store::PauseRecord {
            job: a.clone(),
            by: "ops".into(),
            at: "2026-12-05T00:00:00Z".into(),
            reason: "maintenance".into(),
        })
        .await
        .unwrap();
    sync::apply(&scheduler, &plan).await.unwrap();
    // The pause's UpdateSchedule of what it read before the sync's write, DISABLED.
    scheduler
        .update_schedule()
        .group_name(&group)
        .name(&a)
        .set_schedule_expression(old.schedule_expression)
        .set_description(old.description)
        .state(ScheduleState::Disabled)
        .set_flexible_time_window(old.flexible_time_window)
        .set_target(old.target)
        .send()
        .await
        .unwrap();
    let written = plan
        .changes
        .iter()
        .map(|c| match c {
            sync::Change::Create { name, .. }
            | sync::Change::Update { name, .. }
            | sync::Change::Delete { name } => name.clone(),
        })
        .collect();
    sync::keep_pauses(&scheduler, &pauses, &v2, &plan, &written)
        .await
        .unwrap();
    let now = scheduler
        .get_schedule()
        .group_name(&group)
        .name(&a)
        .send()
        .await
        .unwrap();
    assert_eq!(now.state, Some(ScheduleState::Disabled));
    assert!(
        now.description
            .as_deref()
            .unwrap_or_default()
            .contains("v2"),
        "{:?}",
        now.description
    );
}
