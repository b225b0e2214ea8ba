//! A team's whole catalog, grown (`tests/src/grown.rs`): `SCHEDKIT_SCALE_JOBS` scheduled
//! jobs sharing the example worker's implementations (60 unless said) and
//! `SCHEDKIT_SCALE_CHAINS` chains (10: the template is then over CloudFormation's inline
//! 51,200 bytes and goes through S3). `make scale` runs it at 1,000 and 100.
//!
//! The catalog is checked and rendered with the console (`catalog check`, `iac init`); the
//! template has the stack's resources of the demo's catalog, chains aside, and passes the
//! linters; it deploys to LocalStack; `schedules sync` creates every schedule and a second
//! sync writes nothing; a whole hour is fired through the local firing engine and run by
//! two pollers: every firing DONE once (the failing job's FAILED), every chain DONE with
//! its steps. The accountant finds nothing missed and counts the one failing job for the
//! storm. LocalStack stores the failed alarm but never evaluates it: its own query, as
//! the template deploys it, is run over the metrics the workers printed, and names the
//! failing job, and only it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use schedkit::Status;
use schedkit::catalog::Catalog;
use schedkit_testkit::grown::{Grown, last_whole_hour};
use schedkit_testkit::metrics_insights::QueryAlarm;
use schedkit_testkit::{Stack, StackOptions, WorkerBuild, localstack, processes, unique};

fn size(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{var}={v} is not a number"))
        })
        .unwrap_or(default)
}

/// `schedkit args` with the catalog `catalog`, its output; asserts it succeeds.
fn schedkit(stack: Option<&Stack>, catalog: &Path, args: &[&str]) -> std::process::Output {
    let audit = std::env::temp_dir().join("scale-audit.jsonl");
    let mut command = std::process::Command::new(schedkit_testkit::binary("schedkit"));
    command
        .arg("--catalog")
        .arg(catalog)
        .args(args)
        .env("AWS_ENDPOINT_URL", schedkit_testkit::endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("SCHEDKIT_AUDIT_LOG", audit)
        .env_remove("SCHEDKIT_CATALOG");
    if let Some(stack) = stack {
        command.envs(stack.worker_env());
    }
    let out = command.output().expect("schedkit runs");
    assert!(
        out.status.success(),
        "schedkit {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn resources(template: &str) -> usize {
    let body = &template[template.find("\nResources:\n").expect("Resources")..];
    let body = &body[..body.find("\nOutputs:\n").unwrap_or(body.len())];
    body.lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.trim_end().ends_with(':'))
        .filter(|l| !l.trim_start().starts_with('#'))
        .count()
}

/// The EMF lines in a worker's log.
fn metric_lines(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l.get("_aws").is_some())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grown_catalog_renders_deploys_syncs_runs_an_hour_and_its_failing_job_is_named_by_the_one_failed_alarm()
 {
    let grown = Grown {
        jobs: size("SCHEDKIT_SCALE_JOBS", 60),
        chains: size("SCHEDKIT_SCALE_CHAINS", 10),
    };
    let sdk = localstack().await;
    let started = Utc::now();
    let stage = unique("scale");
    let dir = schedkit_testkit::target_dir().join("scale").join(&stage);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("catalog.toml");
    std::fs::write(&file, grown.toml(None)).unwrap();
    let catalog = Catalog::load(&file).expect("the grown catalog is valid");

    // The console checks it and renders its template.
    let checked = schedkit(None, &file, &["catalog", "check"]);
    assert!(
        String::from_utf8_lossy(&checked.stdout).contains(&grown.failing_job()),
        "catalog check lists every job"
    );
    let template_path = dir.join("template.yaml");
    let code = schedkit_testkit::root().join("functions/worker");
    schedkit(
        None,
        &file,
        &[
            "iac",
            "init",
            "--template",
            template_path.to_str().unwrap(),
            "--code-uri",
            code.to_str().unwrap(),
            "--binary",
            "worker",
        ],
    );
    let template = std::fs::read_to_string(&template_path).unwrap();
    let shipped =
        std::fs::read_to_string(schedkit_testkit::root().join("infra/template.yaml")).unwrap();
    let shipped_catalog =
        Catalog::load(&schedkit_testkit::root().join("infra/catalog.toml")).unwrap();
    // The same stack as the demo's four jobs, chains aside (a state machine and an alarm
    // each), whatever the number of jobs; but for the grant to read secrets, one policy
    // for all of them, which the grown catalog has (a job reads one) and the demo's not.
    assert!(
        template.contains("  WorkerSecretsPolicy:") && !shipped.contains("WorkerSecretsPolicy")
    );
    assert_eq!(
        resources(&template) - 2 * grown.chains - 1,
        resources(&shipped) - 2 * shipped_catalog.chains.len(),
        "{} jobs",
        grown.jobs
    );
    if grown.chains >= 10 {
        assert!(
            template.len() > 51_200,
            "{} bytes: the deploy must go through S3 here",
            template.len()
        );
    }
    for n in 0..grown.chains {
        assert!(
            dir.join(format!("chains/{}.asl.json", Grown::chain(n)))
                .is_file()
        );
    }
    let lint = std::process::Command::new(schedkit_testkit::root().join("infra/lint-templates.sh"))
        .arg(&template_path)
        .output()
        .expect("infra/lint-templates.sh runs");
    assert!(
        lint.status.success(),
        "the linters refuse the grown template: {}{}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );

    // Deployed as any stage is (through S3 when over the inline limit).
    let stack = Stack::create(
        &sdk,
        &stage,
        StackOptions {
            worker: Some(WorkerBuild {
                template: template_path.clone(),
                zip: WorkerBuild::example().zip,
            }),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();

    // Synced; synced again, nothing written.
    let first = schedkit(
        Some(&stack),
        &file,
        &["--stage", &stage, "schedules", "sync", "--yes"],
    );
    let scheduled = grown.jobs + grown.chains;
    let text = String::from_utf8_lossy(&first.stdout);
    assert!(
        text.contains(&format!("applied: {} write(s)", scheduled + 1))
            || text.contains(&format!("applied: {scheduled} write(s)")),
        "{text}"
    );
    let again = schedkit(
        Some(&stack),
        &file,
        &["--stage", &stage, "schedules", "sync", "--yes"],
    );
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(
        text.contains("in sync with the catalog, nothing to do"),
        "{text}"
    );

    // From the last whole hour up to now fired (the accountant expects every firing to
    // now), run by two pollers.
    let (from, _) = last_whole_hour(Utc::now());
    let now = Utc::now();
    let engine = crate::firing_engine::engine(&sdk, &stack, &stack.schedule_group, "scale-engine");
    let fired = engine.fast_forward(from, now).await.unwrap();
    let expected: BTreeSet<String> =
        schedkit::accounting::expected(&catalog, from, now, Duration::ZERO, |_, _| false)
            .into_iter()
            .map(|e| e.key)
            .collect();
    assert!(expected.len() >= grown.firings(1), "an hour at least");
    assert_eq!(fired.len(), expected.len(), "every schedule's firings");
    eprintln!(
        "scale: {} firings fired at {:?}",
        fired.len(),
        Utc::now() - started
    );
    let logs = schedkit_testkit::target_dir().join("scale");
    let workers = [
        processes::worker(&stack, &file, "scale", "one"),
        processes::worker(&stack, &file, "scale", "two"),
    ];
    // Two pollers run about 15 runs a second on this machine: 3,300 runs of 1,000 jobs
    // and 100 chains take about four minutes.
    let limit = Duration::from_secs(120 + expected.len() as u64 / 5);
    let records = drained(&stack, limit).await;
    drop(workers);
    eprintln!(
        "scale: {} records ended at {:?}",
        records.len(),
        Utc::now() - started
    );

    // Every firing ran once: DONE, but the failing job's FAILED; every chain DONE with its
    // four steps.
    let mut by_job: BTreeMap<String, Vec<&schedkit::ExecutionRecord>> = BTreeMap::new();
    for r in &records {
        by_job.entry(r.job.clone()).or_default().push(r);
    }
    let failing = grown.failing_job();
    let ran: BTreeSet<String> = records
        .iter()
        .filter(|r| r.job != "chain-step")
        .map(|r| r.execution_key.clone())
        .collect();
    assert_eq!(ran, expected, "one run per firing, under its firing's key");
    for r in records.iter().filter(|r| r.job != "chain-step") {
        let wanted = if r.job == failing {
            Status::Failed
        } else {
            Status::Done
        };
        assert_eq!((r.status, r.attempt), (wanted, 1), "{r:?}");
    }
    let chain_runs = (0..grown.chains)
        .map(|c| {
            by_job
                .get(&Grown::chain(c))
                .map(Vec::len)
                .unwrap_or_default()
        })
        .sum::<usize>();
    let steps = by_job.get("chain-step").map(Vec::len).unwrap_or_default();
    assert_eq!(steps, 4 * chain_runs, "each chain run's four steps, once");
    assert!(
        records
            .iter()
            .filter(|r| r.status != Status::Done)
            .all(|r| r.job == failing),
        "only the failing job's run is not DONE"
    );

    // The accountant: nothing missed, one job failing (the storm's count).
    eprintln!("scale: checked at {:?}", Utc::now() - started);
    let since = from.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let (metrics, check) = processes::account(&stack, &file, Some(&since));
    let missed: Vec<&serde_json::Value> = check["reported"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "missed")
        .collect();
    assert!(missed.is_empty(), "no false missed: {check:#}");
    assert_eq!(
        processes::metric_by_job(&metrics, "FailingJobs"),
        BTreeMap::from([("-".to_string(), 1.0)]),
        "the failing job, counted once"
    );

    // The failed alarm's own query over what the workers printed: one contributor, the
    // failing job, in the periods of this run.
    let alarm = QueryAlarm::from_template(&template, "FailedAlarm", &stage).unwrap();
    let lines: Vec<serde_json::Value> = ["one", "two"]
        .iter()
        .flat_map(|w| metric_lines(&logs.join(format!("{stage}-{w}.log"))))
        .collect();
    assert!(!lines.is_empty(), "the workers printed their metrics");
    let period = TimeDelta::minutes(5).num_milliseconds();
    let mut named = BTreeSet::new();
    let mut t = started.timestamp_millis() / period * period;
    while t <= Utc::now().timestamp_millis() {
        for s in alarm.contributors(&lines, t, t + period) {
            named.insert(s.group["Job"].clone());
        }
        t += period;
    }
    assert_eq!(
        named,
        BTreeSet::from([failing]),
        "the failed alarm's contributors"
    );
}

/// Waits until the queue is empty and every record of the table has ended (DONE or
/// FAILED); returns the records.
async fn drained(stack: &Stack, limit: Duration) -> Vec<schedkit::ExecutionRecord> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let counts = stack.counts(&stack.queue_url).await.unwrap();
        let records = stack.records().await.unwrap();
        let open = records
            .iter()
            .filter(|r| !matches!(r.status, Status::Done | Status::Failed))
            .count();
        if counts == (0, 0, 0) && open == 0 {
            return records;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the queue holds {counts:?}, {open} records not ended"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
