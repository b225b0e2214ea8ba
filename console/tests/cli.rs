//! The `schedkit` binary: previews, catalog checks, sync dry runs and `fire`, as a user runs
//! them (exact output for the deterministic ones, exit codes, one-line errors).

use std::process::{Command, Output};

use schedkit_testkit::{Stack, StackOptions, endpoint, localstack, schedules, unique};

pub(crate) fn schedkit(args: &[&str]) -> Output {
    command(args).output().expect("schedkit runs")
}

/// The command `schedkit args` from the repository root, on LocalStack with its test keys
/// (a caller may sign as someone else), its audit trail's copy in the shared test file.
pub(crate) fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_schedkit"));
    command
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .env("AWS_ENDPOINT_URL", endpoint())
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env_remove("SCHEDKIT_CATALOG")
        .env(
            "SCHEDKIT_AUDIT_LOG",
            std::env::temp_dir().join("schedkit-cli-test-audit.jsonl"),
        );
    command
}

/// A copy of the shipped catalog, changed by `edit`, written to a temporary file named after
/// `name`; its path.
fn catalog_copy(name: &str, edit: impl FnOnce(String) -> String) -> String {
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../infra/catalog.toml"
    ))
    .unwrap();
    let path = std::env::temp_dir().join(format!("{name}.toml"));
    std::fs::write(&path, edit(shipped)).unwrap();
    path.to_string_lossy().to_string()
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn schedules_next_previews_in_utc_and_in_the_zone() {
    let out = schedkit(&[
        "schedules",
        "next",
        "cron(30 2 * * ? *)",
        "--tz",
        "America/New_York",
        "--from",
        "2027-03-13T00:00:00Z",
        "-n",
        "3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "UTC                   LOCAL (America/New_York)\n\
         2027-03-13T07:30:00Z  2027-03-13 02:30 EST (-05:00)\n\
         2027-03-15T06:30:00Z  2027-03-15 02:30 EDT (-04:00)\n\
         2027-03-16T06:30:00Z  2027-03-16 02:30 EDT (-04:00)\n"
    );
    let json = schedkit(&[
        "--output",
        "json",
        "schedules",
        "next",
        "rate(90 minutes)",
        "--from",
        "2030-01-01T00:00:00Z",
        "-n",
        "2",
    ]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        value,
        serde_json::json!([
            {"utc": "2030-01-01T00:00:00Z", "local": "2030-01-01 00:00 UTC (+00:00)"},
            {"utc": "2030-01-01T01:30:00Z", "local": "2030-01-01 01:30 UTC (+00:00)"}
        ])
    );
}

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["schedules", "next", "cron(0 24 * * ? *)"],
            "schedkit: error: invalid schedule expression `cron(0 24 * * ? *)`: hours field at position 7: 24 is out of range, expected 0-23\n",
        ),
        (
            &["schedules", "next", "rate(5 minutes)", "--tz", "Moon/Base"],
            "schedkit: error: `Moon/Base` is not an IANA time zone name (e.g. Europe/Berlin, America/New_York, UTC)\n",
        ),
        (
            &[
                "--catalog",
                "shared/tests/fixtures/catalogs/lease-too-long.toml",
                "catalog",
                "check",
            ],
            "schedkit: error: shared/tests/fixtures/catalogs/lease-too-long.toml: job `nightly`: field `lease_seconds`: 120 s is longer than the function timeout (60 s, settings.function_timeout_seconds); a lease must end when the function can no longer be running\n",
        ),
        (
            &[
                "fire",
                "record-invoice",
                "--queue-url",
                "http://x",
                "--payload",
                "[1]",
            ],
            "schedkit: error: --payload must be a JSON object\n",
        ),
        (
            &["fire", "long-report", "--in", "99999999999d"],
            "schedkit: error: --in `99999999999d` is too far ahead\n",
        ),
        // A sync without a dead-letter queue stripped the template's: now it must be said.
        (
            &[
                "schedules",
                "sync",
                "--group",
                "g",
                "--queue-arn",
                "arn:aws:sqs:us-east-1:000000000000:q",
                "--role-arn",
                "arn:aws:iam::000000000000:role/r",
            ],
            "schedkit: error: no dead-letter queue for the schedules: give --dead-letter-arn ARN, or --no-dead-letter to drop firings the scheduler cannot deliver\n",
        ),
    ];
    for (args, message) in cases {
        let out = schedkit(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(stderr(&out), message, "{args:?}");
    }
}

#[test]
fn catalog_check_lists_every_job() {
    let out = schedkit(&["catalog", "check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("infra/catalog.toml: valid, 4 jobs\n\nJOB "),
        "{text}"
    );
    for job in [
        "partner-export",
        "flaky-sync",
        "long-report",
        "record-invoice",
    ] {
        assert!(text.contains(&format!("\n{job} ")), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_dry_run_prints_the_diff_and_writes_nothing_then_fire_enqueues() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("cli"), StackOptions::default())
        .await
        .unwrap();
    let catalog_group = unique("cli-group");
    // Without --stage the console works on stage `dev`, whose group the template names so.
    let group = format!("{catalog_group}-dev");
    let catalog = catalog_copy(&catalog_group, |shipped| {
        shipped.replace(
            "schedule_group = \"schedkit\"",
            &format!("schedule_group = \"{catalog_group}\""),
        )
    });
    let queue_arn = stack.arn_of(&stack.queue_url);
    let sync = |extra: &[&str]| {
        let mut args = vec![
            "--catalog",
            &catalog,
            "schedules",
            "sync",
            "--queue-arn",
            &queue_arn,
            "--role-arn",
            "arn:aws:iam::000000000000:role/s",
            "--no-dead-letter",
        ];
        args.extend(extra);
        schedkit(&args)
    };
    let dry = sync(&["--dry-run"]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert_eq!(
        stdout(&dry),
        format!(
            "schedule group {group}:\n+ create schedule group {group}\n\
             + create flaky-sync: rate(6 hours) (UTC)\n\
             + create long-report: cron(0 3 * * ? *) (Europe/Berlin)\n\
             + create partner-export: cron(30 9 ? * MON-FRI *) (America/New_York)\n\
             + create month-end: cron(0 2 1 * ? *) (Europe/Berlin)\n\
             (dry run: nothing changed)\n"
        )
    );
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    assert!(
        scheduler
            .get_schedule_group()
            .name(&group)
            .send()
            .await
            .is_err(),
        "the dry run created nothing"
    );
    assert!(stdout(&sync(&[])).ends_with("applied: 5 write(s)\n"));
    assert_eq!(
        stdout(&sync(&[])),
        format!("schedule group {group}: in sync with the catalog, nothing to do\n")
    );

    // A schedule the catalog does not list is deleted only when the operator says so.
    schedules::to_queue(
        &scheduler,
        &group,
        "stray",
        "rate(1 hour)",
        &queue_arn,
        None,
    )
    .send()
    .await
    .unwrap();
    let stray_exists = || schedules::exists(&scheduler, &group, "stray");
    let refused = sync(&[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert_eq!(
        stderr(&refused),
        format!(
            "schedkit: error: delete 1 schedule(s) from group {group}: stray: refusing without --yes (no terminal to confirm on)\n"
        )
    );
    assert!(stray_exists().await, "nothing was deleted without --yes");
    let confirmed = sync(&["--yes"]);
    assert!(confirmed.status.success(), "{}", stderr(&confirmed));
    assert!(
        stdout(&confirmed).contains("- delete stray"),
        "{}",
        stdout(&confirmed)
    );
    assert!(!stray_exists().await);

    let fire = schedkit(&[
        "--catalog",
        &catalog,
        "fire",
        "long-report",
        "--queue-url",
        &stack.queue_url,
        "--at",
        "2030-06-03T09:00:00Z",
        "--role-arn",
        "arn:aws:iam::000000000000:role/s",
    ]);
    assert!(fire.status.success(), "{}", stderr(&fire));
    assert!(stdout(&fire).starts_with(&format!("long-report scheduled for 2030-06-03T09:00:00Z (one-time schedule {group}-once/long-report-")), "{}", stdout(&fire));
    let now = schedkit(&[
        "--catalog",
        &catalog,
        "fire",
        "long-report",
        "--queue-url",
        &stack.queue_url,
        "--payload",
        r#"{"seconds": 1}"#,
        "--priority",
        "-7",
    ]);
    assert!(now.status.success(), "{}", stderr(&now));
    let messages = stack
        .receive(1, std::time::Duration::from_secs(3))
        .await
        .unwrap();
    let envelope = schedkit::Envelope::parse(messages[0].body.as_deref().unwrap()).unwrap();
    assert_eq!(
        (envelope.job.as_str(), envelope.payload_value()),
        ("long-report", serde_json::json!({"seconds": 1}))
    );
    assert_eq!(envelope.priority, Some(-7), "the run carries its priority");
    // A priority out of the catalog's range is refused before anything is sent.
    let out_of_range = schedkit(&[
        "--catalog",
        &catalog,
        "fire",
        "long-report",
        "--queue-url",
        &stack.queue_url,
        "--priority",
        "11",
    ]);
    assert!(!out_of_range.status.success());
    assert!(
        stderr(&out_of_range).contains("--priority"),
        "{}",
        stderr(&out_of_range)
    );
}

/// The time bomb of a one-off migration that ran yesterday: a catalog holding a one-time
/// job whose time has passed breaks no command. `catalog check` warns and exits 0, sync
/// does not create the schedule, `fire` and the previews work, and the worker (which
/// refused to start on such a catalog) starts and runs a job to DONE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_with_a_past_one_time_job_breaks_no_command() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("past"), StackOptions::default())
        .await
        .unwrap();
    let catalog_group = unique("past-group");
    // flaky-sync becomes the one-off that ran in 2020 (the worker implements it).
    let catalog = catalog_copy(&catalog_group, |shipped| {
        let text = shipped
            .replace(
                "schedule_group = \"schedkit\"",
                &format!("schedule_group = \"{catalog_group}\""),
            )
            .replace(
                "expression = \"rate(6 hours)\"",
                "expression = \"at(2020-03-01T02:00:00)\"",
            )
            // A one-time schedule has no start.
            .replace("start = 2026-01-01T00:00:00Z\n", "");
        assert!(text.contains("at(2020-03-01T02:00:00)"));
        text
    });
    let path = std::path::PathBuf::from(&catalog);

    let check = schedkit(&["--catalog", &catalog, "catalog", "check"]);
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
    assert!(
        stderr(&check).starts_with(&format!(
            "warning: {catalog}: job `flaky-sync`: field `schedule.expression`: at(2020-03-01T02:00:00) has no run left"
        )),
        "{}",
        stderr(&check)
    );
    assert!(
        stdout(&check).contains("valid, 4 jobs"),
        "{}",
        stdout(&check)
    );

    let next = schedkit(&[
        "--catalog",
        &catalog,
        "schedules",
        "next",
        "rate(1 hour)",
        "-n",
        "1",
    ]);
    assert!(next.status.success(), "{}", stderr(&next));

    let queue_arn = stack.arn_of(&stack.queue_url);
    let dlq_arn = stack.arn_of(&stack.schedule_dlq_url);
    let dry = schedkit(&[
        "--catalog",
        &catalog,
        "schedules",
        "sync",
        "--dry-run",
        "--queue-arn",
        &queue_arn,
        "--role-arn",
        "arn:aws:iam::000000000000:role/s",
        "--dead-letter-arn",
        &dlq_arn,
    ]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert!(
        !stdout(&dry).contains("create flaky-sync"),
        "{}",
        stdout(&dry)
    );
    assert!(
        stdout(&dry).contains("flaky-sync: no run left, left as it is"),
        "{}",
        stdout(&dry)
    );
    assert!(stderr(&dry).contains("warning: "), "{}", stderr(&dry));

    let fired = schedkit(&[
        "--catalog",
        &catalog,
        "--queue-url",
        &stack.queue_url,
        "fire",
        "long-report",
        "--payload",
        r#"{"seconds":0}"#,
    ]);
    assert!(fired.status.success(), "{}", stderr(&fired));

    let worker = tokio::process::Command::new(schedkit_testkit::binary("worker"))
        .args(["--until-drained", "--wait-seconds", "1"])
        .envs(stack.worker_env())
        .env("SCHEDKIT_CATALOG", &path)
        .output()
        .await
        .unwrap();
    assert!(
        worker.status.success(),
        "the worker refused the catalog: {}",
        String::from_utf8_lossy(&worker.stderr)
    );
    let records = stack.records().await.unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].status, schedkit::Status::Done);
}

/// `fire` on a deployed stage: a run 900.6 s ahead (which the console took for a queued run
/// and the library for a schedule, with no role: refused) becomes a one-time schedule with
/// the stage's role and schedule DLQ (it had none); a chain fired sends its trigger to the
/// jobs queue, with its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_schedules_with_the_stages_dlq_and_sends_a_chains_trigger_to_the_jobs_queue() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("fire"), StackOptions::default())
        .await
        .unwrap();
    let at = (chrono::Utc::now() + chrono::Duration::milliseconds(900_600))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let out = schedkit(&[
        "--stage",
        &stack.name,
        "--output",
        "json",
        "fire",
        "long-report",
        "--at",
        &at,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let fired: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let (group, name) = (
        fired["schedule"]["group"].as_str().unwrap(),
        fired["schedule"]["name"].as_str().unwrap(),
    );
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let schedule = scheduler
        .get_schedule()
        .group_name(group)
        .name(name)
        .send()
        .await
        .unwrap();
    let target = schedule.target.unwrap();
    assert_eq!(target.role_arn, stack.scheduler_role_arn);
    assert_eq!(
        target.dead_letter_config.and_then(|d| d.arn),
        Some(stack.arn_of(&stack.schedule_dlq_url)),
        "a one-time schedule without the stage's DLQ drops what it cannot deliver"
    );

    // A chain: fired, its trigger goes to the jobs queue (the worker starts one execution
    // per key, `chains::*` in the integration tests), with the key given.
    let out = schedkit(&[
        "--stage",
        &stack.name,
        "--output",
        "json",
        "fire",
        "month-end",
        "--key",
        "2026-11",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let fired: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(fired["job"], "month-end");
    assert!(fired["queued"]["message_id"].is_string(), "{fired}");
    let queued = stack
        .receive(10, std::time::Duration::from_secs(2))
        .await
        .unwrap();
    let trigger: Vec<serde_json::Value> = queued
        .iter()
        .filter_map(|m| serde_json::from_str(m.body.as_deref()?).ok())
        .filter(|v: &serde_json::Value| v["job"] == "month-end")
        .collect();
    assert_eq!(trigger.len(), 1, "{queued:?}");
    // A chain's run lives in its key space: the key given is named in it.
    assert_eq!(trigger[0]["key"], "month-end#2026-11");
}

/// `schedules backfill` of a past span, twice: every occurrence runs, each DONE once (the
/// second backfill's runs are duplicates the store absorbs); a dry run lists the span
/// without sending; a span in the future is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_run_twice_runs_every_occurrence_once() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("backfill"), StackOptions::default())
        .await
        .unwrap();
    // long-report runs daily at 03:00 Berlin: six days of it, with a 0 s payload.
    let catalog = catalog_copy(&format!("{}-backfill", stack.name), |shipped| {
        shipped.replace("payload = { seconds = 3 }", "payload = { seconds = 0 }")
    });
    let args = |extra: &[&str]| {
        let mut a = vec![
            "--catalog",
            &catalog,
            "--stage",
            &stack.name,
            "schedules",
            "backfill",
            "long-report",
            "--from",
            "2026-11-01T00:00:00Z",
            "--to",
            "2026-11-07T00:00:00Z",
        ];
        a.extend_from_slice(extra);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        schedkit(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let dry = run(&["--dry-run"]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert!(
        stdout(&dry).starts_with("long-report: 6 run(s) from 2026-11-01T00:00:00Z to 2026-11-07T00:00:00Z (dry run: nothing sent)\n  2026-11-01T02:00:00Z\n"),
        "{}",
        stdout(&dry)
    );
    assert!(
        stack
            .receive(1, std::time::Duration::from_secs(1))
            .await
            .unwrap()
            .is_empty()
    );

    for _ in 0..2 {
        let out = run(&[]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stdout(&out).contains("6 run(s)"), "{}", stdout(&out));
    }
    let worker = stack.processor(
        stack.example_registry(),
        "backfill",
        schedkit::Metrics::capture().0,
    );
    let stats = stack.run_until_drained(std::slice::from_ref(&worker)).await;
    assert_eq!(
        stats.outcomes.get("succeeded"),
        Some(&6),
        "{:?}",
        stats.outcomes
    );
    assert_eq!(
        stats.outcomes.get("duplicate"),
        Some(&6),
        "{:?}",
        stats.outcomes
    );
    let records = stack.records().await.unwrap();
    assert_eq!(records.len(), 6);
    assert!(
        records
            .iter()
            .all(|r| r.status == schedkit::Status::Done && r.attempt == 1)
    );

    let ahead = schedkit(&[
        "--catalog",
        &catalog,
        "--stage",
        &stack.name,
        "schedules",
        "backfill",
        "long-report",
        "--from",
        "2026-11-01T00:00:00Z",
        "--to",
        "2099-01-01T00:00:00Z",
    ]);
    assert_eq!(ahead.status.code(), Some(2));
    assert!(
        stderr(&ahead).contains("is in the future"),
        "{}",
        stderr(&ahead)
    );
}

/// `iac render` writes each chain's definition beside the template (`chains/<chain>.asl.json`),
/// says when all is in sync, fails `--check` naming the file that disagrees, and removes
/// the definition of a chain the catalog no longer has.
#[test]
fn iac_render_writes_checks_and_prunes_the_chain_definitions() {
    let dir = std::env::temp_dir().join(format!("schedkit-render-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("chains")).unwrap();
    let template = dir.join("template.yaml");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml"),
        &template,
    )
    .unwrap();
    std::fs::write(dir.join("chains/gone.asl.json"), "{}\n").unwrap();
    let catalog = catalog_copy("render-chain", |shipped| {
        shipped
            + "\n[chains.quarter-end]\nowner = \"finance\"\nstages = [\"long-report\", [\"flaky-sync\", \"partner-export\"]]\n"
    });
    let render = |extra: &[&str]| {
        let mut args = vec![
            "--catalog",
            catalog.as_str(),
            "iac",
            "render",
            "--template",
            template.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        schedkit(&args)
    };
    let definition = dir.join("chains/quarter-end.asl.json");

    let stale = render(&["--check"]);
    assert_eq!(stale.status.code(), Some(2), "{}", stdout(&stale));
    assert!(
        stderr(&stale).contains("quarter-end.asl.json") && stderr(&stale).contains("gone.asl.json"),
        "{}",
        stderr(&stale)
    );

    let written = render(&[]);
    assert!(written.status.success(), "{}", stderr(&written));
    assert!(
        stdout(&written).contains("quarter-end.asl.json: regenerated from")
            && stdout(&written).contains("month-end.asl.json: regenerated from")
            && stdout(&written).contains("gone.asl.json: removed (no such chain in"),
        "{}",
        stdout(&written)
    );
    assert!(!dir.join("chains/gone.asl.json").exists());
    let text = std::fs::read_to_string(&definition).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed["StartAt"], "stage-1");
    assert_eq!(
        parsed["States"]["stage-2"]["Branches"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let again = render(&["--check"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stdout(&again).contains("in sync with") && stdout(&again).contains("(2 chain definitions)")
    );

    std::fs::write(&definition, text.replace("stage-2", "stage-two")).unwrap();
    let edited = render(&["--check"]);
    assert_eq!(edited.status.code(), Some(2));
    assert!(
        stderr(&edited).contains("quarter-end.asl.json disagree with"),
        "{}",
        stderr(&edited)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `chains skip`'s output for the step does not collide with the global `--output` (the
/// print format): the command parses and reaches the stage (here one that is not
/// deployed, a usage error naming it), where it used to panic on every call.
#[test]
fn chains_skip_parses_its_steps_output_beside_the_global_output_format() {
    for args in [
        vec![
            "--stage",
            "nowhere-deployed",
            "chains",
            "skip",
            "k",
            "s",
            "--reason",
            "done by hand",
            "--yes",
        ],
        vec![
            "--stage",
            "nowhere-deployed",
            "--output",
            "json",
            "chains",
            "skip",
            "k",
            "s",
            "--step-output",
            "{\"rows\": 3}",
            "--reason",
            "done by hand",
            "--yes",
        ],
    ] {
        let out = schedkit(&args);
        let said = stderr(&out);
        assert_ne!(out.status.code(), Some(101), "a panic: {said}");
        assert!(!said.contains("Mismatch between definition"), "{said}");
        assert_eq!(
            out.status.code(),
            Some(2),
            "a usage error for the stage: {said}"
        );
    }
}

/// `catalog reference` prints the book's catalog reference page as committed, and
/// `catalog schema` a JSON Schema of the catalog an editor can load.
#[test]
fn catalog_reference_prints_the_books_page_and_catalog_schema_a_json_schema() {
    let out = schedkit(&["catalog", "reference"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/book/src/reference/catalog.md"
    ))
    .unwrap();
    assert_eq!(stdout(&out), page);
    let out = schedkit(&["catalog", "schema"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let schema: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(
        schema["$schema"]
            .as_str()
            .unwrap()
            .contains("json-schema.org")
    );
    assert!(schema["properties"]["jobs"].is_object(), "{schema}");
}
