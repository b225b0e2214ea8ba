//! Catalog validation: every invalid fixture fails with a message naming file, job and
//! field; the shipped catalog is valid.

use std::path::Path;

use schedkit::catalog::{Catalog, Target};

#[test]
fn every_invalid_fixture_fails_naming_file_job_and_field() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/catalogs");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let expected = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} has no `# expect:` line", path.display()));
        let name = path.file_name().unwrap().to_string_lossy();
        let error = Catalog::parse(&text, &name).expect_err(&name).to_string();
        assert!(
            error.starts_with(expected),
            "{name}:\n  expected: {expected}\n  got:      {error}"
        );
        checked += 1;
    }
    assert!(checked >= 42, "only {checked} fixtures");
}

#[test]
fn all_problems_are_reported_not_just_the_first() {
    let text = r#"
[jobs.a]
owner = ""
lease_seconds = 600
[jobs.b]
owner = "ops"
[jobs.b.schedule]
expression = "rate(1 minutes)"
timezone = "Nowhere/City"
"#;
    let errors = Catalog::parse(text, "c.toml").unwrap_err();
    let fields: Vec<_> = errors
        .0
        .iter()
        .map(|e| {
            format!(
                "{}.{}",
                e.job.as_deref().unwrap_or("-"),
                e.field.as_deref().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            "a.owner",
            "a.lease_seconds",
            "b.schedule.expression",
            "b.schedule.timezone"
        ]
    );
}

/// A one-off migration that ran yesterday is history, not an error: the catalog loads (so
/// every binary starts) and says so in a warning naming file, job and field.
#[test]
fn a_past_one_time_job_or_an_ended_schedule_is_a_warning_not_an_error() {
    let text = r#"
[jobs.migrate-2020]
owner = "data"
[jobs.migrate-2020.schedule]
expression = "at(2020-03-01T02:00:00)"
timezone = "Europe/Berlin"

[jobs.old-campaign]
owner = "growth"
[jobs.old-campaign.schedule]
expression = "rate(1 day)"
start = 2020-01-01T00:00:00Z
end = 2020-02-01T00:00:00Z

[jobs.paused-migration]
owner = "data"
[jobs.paused-migration.schedule]
expression = "at(2020-03-01T02:00:00)"
enabled = false

[jobs.future]
owner = "data"
[jobs.future.schedule]
expression = "at(2099-03-01T02:00:00)"
"#;
    let catalog = Catalog::parse(text, "c.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(catalog.jobs.len(), 4);
    let warnings: Vec<String> = catalog.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(
        warnings[0].starts_with("c.toml: job `migrate-2020`: field `schedule.expression`: at(2020-03-01T02:00:00) has no run left"),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[1].starts_with(
            "c.toml: job `old-campaign`: field `schedule.end`: rate(1 day) has no run left"
        ),
        "{}",
        warnings[1]
    );
}

#[test]
fn a_rate_without_a_start_is_warned_of_its_phase_the_accountant_cannot_know() {
    let text = r#"
[jobs.drifting]
owner = "data"
[jobs.drifting.schedule]
expression = "rate(6 hours)"

[jobs.anchored]
owner = "data"
[jobs.anchored.schedule]
expression = "rate(6 hours)"
start = 2026-01-01T00:00:00Z
"#;
    let catalog = Catalog::parse(text, "c.toml").unwrap_or_else(|e| panic!("{e}"));
    let warnings: Vec<String> = catalog.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].starts_with(
            "c.toml: job `drifting`: field `schedule.start`: rate(6 hours) without a start"
        ) && warnings[0].contains("the accountant does not expect its firings"),
        "{}",
        warnings[0]
    );
    let day = |t: &str| t.parse::<chrono::DateTime<chrono::Utc>>().unwrap();
    let expected = schedkit::accounting::expected(
        &catalog,
        day("2026-06-01T00:00:00Z"),
        day("2026-06-02T00:00:00Z"),
        std::time::Duration::from_secs(600),
        |_, _| false,
    );
    assert_eq!(
        expected.len(),
        4,
        "the anchored one's four, none of the other"
    );
    assert!(expected.iter().all(|e| e.name == "anchored"));
}

#[test]
fn the_shipped_catalog_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/catalog.toml");
    let catalog = Catalog::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(catalog.warnings.is_empty(), "{:?}", catalog.warnings);
    let names: Vec<_> = catalog.jobs.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "flaky-sync",
            "long-report",
            "partner-export",
            "record-invoice"
        ]
    );
    let report = catalog.job("long-report").unwrap();
    assert_eq!(report.target, Target::Queue);
    assert_eq!(report.policy.lease.as_secs(), 4);
    assert_eq!(
        report.schedule.as_ref().unwrap().expression.as_str(),
        "cron(0 3 * * ? *)"
    );
    assert!(catalog.job("record-invoice").unwrap().schedule.is_none());
    assert_eq!(
        catalog
            .job("partner-export")
            .unwrap()
            .policy
            .retry
            .max_attempts,
        3
    );
}

#[test]
fn limits_are_read_into_the_catalog_and_each_job() {
    let text = r#"
[limits.partner-api]
concurrency = 3
rate = "20/minute"

[jobs.partner-export]
owner = "ops"
limits = ["partner-api"]
concurrency = { limit = 1, key = "{account}" }
max_wait_seconds = 3600
"#;
    let catalog = Catalog::parse(text, "c.toml").unwrap();
    let limit = &catalog.limits["partner-api"];
    assert_eq!(limit.concurrency.map(|n| n.get()), Some(3));
    assert_eq!(
        limit.rate.map(|r| r.to_string()).as_deref(),
        Some("20/minute")
    );
    let job = &catalog.jobs["partner-export"].limits;
    assert_eq!(job.shared, ["partner-api"]);
    let own = job.concurrency.as_ref().unwrap();
    assert_eq!(own.limit.get(), 1);
    assert_eq!(
        own.key.as_ref().map(|k| k.to_string()).as_deref(),
        Some("{account}")
    );
    assert_eq!(job.max_wait, Some(std::time::Duration::from_secs(3600)));
    assert!(
        !catalog
            .jobs
            .values()
            .any(|j| j.name != "partner-export" && j.limits.any())
    );
    // What the worker enforces: its own keyed concurrency first, then the shared limit.
    let flow = &catalog.jobs["partner-export"].policy.flow;
    let payload = serde_json::json!({"account": "acme"});
    let gates = flow.gates("partner-export", payload.as_object()).unwrap();
    let items: Vec<_> = gates.iter().map(|g| g.item.as_str()).collect();
    assert_eq!(
        items,
        [
            ".schedkit/concurrency/partner-export/acme",
            ".schedkit/limit/partner-api"
        ]
    );
    assert_eq!(gates[1].spacing, Some(std::time::Duration::from_secs(3)));
    assert_eq!(flow.max_wait, Some(std::time::Duration::from_secs(3600)));
    assert!(catalog.warnings.is_empty(), "{:?}", catalog.warnings);
}

#[test]
fn a_limits_fair_key_and_a_jobs_priority_order_the_runs_waiting_for_it() {
    let text = r#"
[limits.exports]
concurrency = 4
fair = "{tenant}"

[jobs.export]
owner = "ops"
payload = { tenant = "a" }
limits = ["exports"]
priority = 5

[jobs.backfill]
owner = "ops"
payload = { tenant = "a" }
limits = ["exports"]
"#;
    let catalog = Catalog::parse(text, "c.toml").unwrap();
    let flow = &catalog.jobs["export"].policy.flow;
    assert_eq!(flow.priority, 5);
    assert_eq!(catalog.jobs["backfill"].policy.flow.priority, 0);
    let share = |tenant: &str| {
        let payload = serde_json::json!({ "tenant": tenant });
        flow.gates("export", payload.as_object()).unwrap()[0]
            .share
            .clone()
    };
    assert_eq!(
        (share("a"), share("b")),
        ("a".into(), "b".into()),
        "a share per tenant"
    );
    let unfair = text.replace("fair = \"{tenant}\"\n", "");
    let catalog = Catalog::parse(&unfair, "c.toml").unwrap();
    let gates = catalog.jobs["export"]
        .policy
        .flow
        .gates("export", None)
        .unwrap();
    assert_eq!(
        gates[0].share, "export",
        "without `fair`, each job is a share"
    );

    let bad = r#"
[limits.paced]
rate = "1/second"
fair = "{tenant}"
[limits.broken]
concurrency = 1
fair = "{tenant"
[jobs.loud]
owner = "ops"
priority = 11
limits = ["paced"]
"#;
    let errors = Catalog::parse(bad, "c.toml").unwrap_err().to_string();
    for expected in [
        "limits.paced.fair",
        "no `concurrency` to share",
        "limits.broken.fair",
        "11 is outside -10..=10",
    ] {
        assert!(errors.contains(expected), "{expected}: {errors}");
    }
    // A job without limits may have a priority too: above 0, its runs wait in the urgent
    // queue (schedkit::queue::urgent).
    let free = "[jobs.free]\nowner = \"ops\"\npriority = 1\n";
    let catalog = Catalog::parse(free, "c.toml").unwrap();
    assert_eq!(catalog.jobs["free"].spec.priority, Some(1));
}

#[test]
fn a_fired_runs_priority_is_within_the_jobs_range() {
    let ok = r#"{"job":"j","scheduled_for":"2026-12-01T00:00:00Z","priority":-10}"#;
    assert_eq!(schedkit::Envelope::parse(ok).unwrap().priority, Some(-10));
    let bad = r#"{"job":"j","scheduled_for":"2026-12-01T00:00:00Z","priority":11}"#;
    let error = schedkit::Envelope::parse(bad).unwrap_err().to_string();
    assert!(
        error.contains("field `priority`: 11 is outside -10..=10"),
        "{error}"
    );
}

#[test]
fn limits_a_gate_cannot_hold_or_a_run_would_spend_twice_are_refused() {
    let text = r#"
[limits.huge]
concurrency = 301
[limits.a]
rate = "1/minute"
[limits.b]
rate = "2/minute"
[jobs.two-rates]
owner = "ops"
limits = ["a", "b"]
[jobs.wide]
owner = "ops"
concurrency = { limit = 1000 }
"#;
    let errors = Catalog::parse(text, "c.toml").unwrap_err().to_string();
    assert!(
        errors.contains("limits.huge.concurrency")
            && errors.contains("301 is more than a limit can hold (300"),
        "{errors}"
    );
    assert!(
        errors.contains("names more than one limit with a rate (a, b)"),
        "{errors}"
    );
    assert!(
        errors.contains("1000 is more than a limit can hold"),
        "{errors}"
    );
}

#[test]
fn deadlines_are_the_catalogs_or_the_retry_policys_worst_case_for_what_is_scheduled() {
    use schedkit::catalog::deadlines::{DEADLINE_MARGIN, worst_case};
    use std::time::Duration;
    let text = r#"
[jobs.nightly]
owner = "data"
lease_seconds = 30
timeout_seconds = 30
[jobs.nightly.retry]
max_attempts = 3
first_delay_seconds = 5
base_delay_seconds = 60
[jobs.nightly.schedule]
expression = "cron(0 2 * * ? *)"
flexible_window_minutes = 10

[jobs.report]
owner = "data"
deadline = "45m"
[jobs.report.schedule]
expression = "cron(0 3 * * ? *)"

[jobs.adhoc]
owner = "data"

[chains.close]
owner = "finance"
stages = ["nightly", ["report", "adhoc"]]
[chains.close.schedule]
expression = "cron(0 4 * * ? *)"
"#;
    let catalog = Catalog::parse(text, "c.toml").unwrap();
    let nightly = &catalog.jobs["nightly"];
    // 3 attempts of 30 s, delays of 5 s and 60 s, the 10-minute window, the margin.
    assert_eq!(
        nightly.deadline(),
        Some(Duration::from_secs(90 + 65 + 600) + DEADLINE_MARGIN)
    );
    assert_eq!(
        catalog.jobs["report"].deadline(),
        Some(Duration::from_secs(45 * 60))
    );
    assert_eq!(
        catalog.jobs["adhoc"].deadline(),
        None,
        "unscheduled, none given"
    );
    // A chain: its stages' slowest steps' worst cases added up, and the margin.
    let slowest =
        worst_case(&catalog.jobs["report"].policy).max(worst_case(&catalog.jobs["adhoc"].policy));
    assert_eq!(
        catalog.chains["close"].deadline(&catalog),
        Some(worst_case(&nightly.policy) + slowest + DEADLINE_MARGIN)
    );
    // The shipped catalog: every scheduled job and chain has one.
    let shipped =
        Catalog::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/catalog.toml"))
            .unwrap();
    for job in shipped.jobs.values().filter(|j| j.schedule.is_some()) {
        assert!(job.deadline().is_some(), "{}", job.name);
    }
    for chain in shipped.chains.values().filter(|c| c.schedule.is_some()) {
        assert!(chain.deadline(&shipped).is_some(), "{}", chain.name);
    }
}

/// The names of a struct's fields as serde reads them: a deserializer that records what
/// `deserialize_struct` is asked for and stops there.
fn fields_of<T: for<'de> serde::Deserialize<'de>>() -> &'static [&'static str] {
    struct Fields(std::cell::Cell<&'static [&'static str]>);
    #[derive(Debug)]
    struct Stop;
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("stop")
        }
    }
    impl std::error::Error for Stop {}
    impl serde::de::Error for Stop {
        fn custom<M: std::fmt::Display>(_: M) -> Self {
            Stop
        }
    }
    impl<'de> serde::Deserializer<'de> for &Fields {
        type Error = Stop;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0.set(fields);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let recorder = Fields(std::cell::Cell::new(&[]));
    let _ = T::deserialize(&recorder);
    recorder.0.get()
}

/// The catalog's header is its reference: every field serde reads is named there (a field
/// added without a line there fails this test).
#[test]
fn the_shipped_catalogs_header_documents_every_field() {
    use schedkit::catalog::*;
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/catalog.toml"),
    )
    .unwrap();
    let header: String = text
        .lines()
        .take_while(|l| l.starts_with('#') || l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    let tables: [(&str, &[&str]); 9] = [
        ("job", fields_of::<JobSpec>()),
        ("settings", fields_of::<Settings>()),
        ("schedule", fields_of::<ScheduleSpec>()),
        ("retry", fields_of::<RetrySpec>()),
        ("command", fields_of::<CommandSpec>()),
        ("chain", fields_of::<ChainSpec>()),
        ("step", fields_of::<StepSpec>()),
        ("limit", fields_of::<LimitSpec>()),
        ("concurrency", fields_of::<ConcurrencySpec>()),
    ];
    let mut missing = Vec::new();
    for (table, fields) in tables {
        assert!(!fields.is_empty(), "{table}: no fields read");
        for field in fields {
            let named = header
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|word| word == *field);
            if !named {
                missing.push(format!("{table}.{field}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in infra/catalog.toml's header: {missing:?}"
    );
}
