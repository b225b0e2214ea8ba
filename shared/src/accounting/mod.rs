//! Every expected firing accounted for. A failure alarm cannot fire for a run that never
//! started, and nothing in AWS says that a schedule did not fire; but the catalog says when
//! every scheduled job and chain should run (zones, daylight saving, start and end dates,
//! flexible windows) and the execution store says what did. This joins the two: the
//! firings due in a window ([`expected`]), each read against its record ([`verdict`]):
//! absent once its window and a grace period have passed, **missed**; present but not
//! DONE by its deadline ([`crate::catalog::deadlines`]), **late**.
//!
//! Pure: the caller reads the records (by key: a scheduled run's key is
//! `<name>#<scheduled time>`) and the pauses, and says what time it is.

pub mod books;
pub mod ledger;
pub mod stage;

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::catalog::{Catalog, model::ScheduleSpec};
use crate::schedule::Schedule;
use crate::store::{ExecutionRecord, Status};

/// One firing the catalog expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// The job's or chain's name.
    pub name: String,
    /// Whether it is a chain's.
    pub chain: bool,
    /// When it was due to fire.
    pub scheduled_for: DateTime<Utc>,
    /// The key its run's record has.
    pub key: String,
    /// After this, a firing with no record is missed: its time, its flexible window and
    /// the grace period.
    pub missed_after: DateTime<Utc>,
    /// After this, a run not DONE is late: its time and its deadline.
    pub due_by: DateTime<Utc>,
}

/// How one expected firing stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No record yet, and still within its window and grace: not counted either way.
    NotYet,
    /// No record, past its window and grace: the scheduler did not fire, or the message
    /// never reached a worker.
    Missed,
    /// A record, not ended, before its deadline.
    Running,
    /// A record not DONE (nor decided otherwise) past its deadline.
    Late,
    /// Ended: DONE (in time or not: a late run is reported while it is late, and no
    /// longer once DONE), or decided otherwise (skipped by its overlap policy, cancelled).
    Accounted,
}

/// The firings of every scheduled job and chain in `[from, to)`: not a disabled schedule's
/// (`enabled = false`), nor one a pause withheld (`withheld(name, at)`: the job is paused
/// since before `at`, or was paused at `at` and resumed since).
pub fn expected(
    catalog: &Catalog,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    grace: Duration,
    withheld: impl Fn(&str, DateTime<Utc>) -> bool,
) -> Vec<Expected> {
    let jobs = catalog.jobs.values().filter_map(|job| {
        let deadline = job.deadline()?;
        Some((
            &job.name,
            false,
            job.schedule.as_ref()?,
            job.spec.schedule.as_ref()?,
            deadline,
        ))
    });
    let chains = catalog.chains.values().filter_map(|chain| {
        let deadline = chain.deadline(catalog)?;
        Some((
            &chain.name,
            true,
            chain.schedule.as_ref()?,
            chain.spec.schedule.as_ref()?,
            deadline,
        ))
    });
    let mut out = Vec::new();
    for (name, chain, schedule, spec, deadline) in jobs.chain(chains) {
        out.extend(firings(
            name, chain, schedule, spec, deadline, grace, from, to, &withheld,
        ));
    }
    out.sort_by(|a, b| (a.scheduled_for, &a.name).cmp(&(b.scheduled_for, &b.name)));
    out
}

#[allow(clippy::too_many_arguments)] // one schedule's facts, each needed
fn firings(
    name: &str,
    chain: bool,
    schedule: &Schedule,
    spec: &ScheduleSpec,
    deadline: Duration,
    grace: Duration,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    withheld: &impl Fn(&str, DateTime<Utc>) -> bool,
) -> Vec<Expected> {
    if !spec.enabled {
        return Vec::new();
    }
    let window = Duration::from_secs(u64::from(spec.flexible_window_minutes) * 60);
    schedule
        .between(from, to)
        .into_iter()
        .filter(|at| !withheld(name, *at))
        .map(|at| Expected {
            name: name.to_string(),
            chain,
            scheduled_for: at,
            key: format!("{name}#{}", crate::envelope::format_instant(&at)),
            missed_after: at + window + grace,
            due_by: at + deadline,
        })
        .collect()
}

/// How `expected` stands at `now`, given its record (None: the key has none). A record
/// of another job under the key (an explicit key that names this job's firing: a fire or a
/// forged message) is not this job's run: the firing it stands in for was refused.
pub fn verdict(
    expected: &Expected,
    record: Option<&ExecutionRecord>,
    now: DateTime<Utc>,
) -> Verdict {
    match record.filter(|r| r.job == expected.name) {
        None if now >= expected.missed_after => Verdict::Missed,
        None => Verdict::NotYet,
        Some(r) if matches!(r.status, Status::Done | Status::Skipped | Status::Cancelled) => {
            Verdict::Accounted
        }
        Some(_) if now >= expected.due_by => Verdict::Late,
        Some(_) => Verdict::Running,
    }
}

/// A run of `job` under `key`, claimed at `at` and RUNNING: what the accountant finds.
#[cfg(test)]
pub(crate) fn run_of(key: &str, job: &str, at: DateTime<Utc>) -> ExecutionRecord {
    let claim = crate::store::ClaimRequest {
        key: key.into(),
        job: job.into(),
        scheduled_for: at.to_rfc3339(),
        payload_hash: "h".into(),
        input: "{}".into(),
        message_id: None,
        owner: "w:1".into(),
        now: at,
        lease: Duration::from_secs(60),
        retention: Duration::from_secs(3600),
        redrive: None,
    };
    crate::store::claimed_record(None, &claim)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CATALOG: &str = r#"
[jobs.nightly]
owner = "data"
[jobs.nightly.schedule]
expression = "cron(30 2 * * ? *)"
timezone = "Europe/Berlin"

[jobs.hourly]
owner = "data"
deadline = "20m"
[jobs.hourly.schedule]
expression = "rate(1 hour)"
start = 2026-01-01T00:00:00Z
flexible_window_minutes = 5

[jobs.off]
owner = "data"
[jobs.off.schedule]
expression = "rate(1 hour)"
enabled = false

[jobs.adhoc]
owner = "data"
"#;

    fn at(t: &str) -> DateTime<Utc> {
        t.parse().unwrap()
    }

    fn catalog() -> Catalog {
        Catalog::parse(CATALOG, "c.toml").unwrap()
    }

    fn day(from: &str, to: &str) -> Vec<Expected> {
        expected(
            &catalog(),
            at(from),
            at(to),
            Duration::from_secs(600),
            |_, _| false,
        )
    }

    #[test]
    fn a_day_expects_each_scheduled_firing_once_and_nothing_of_a_disabled_or_unscheduled_job() {
        let all = day("2026-06-01T00:00:00Z", "2026-06-02T00:00:00Z");
        let count = |name: &str| all.iter().filter(|e| e.name == name).count();
        assert_eq!(
            (
                count("nightly"),
                count("hourly"),
                count("off"),
                count("adhoc")
            ),
            (1, 24, 0, 0)
        );
        let nightly = all.iter().find(|e| e.name == "nightly").unwrap();
        // 02:30 in Berlin in summer is 00:30 UTC; its key as the scheduler's envelope has it.
        assert_eq!(nightly.scheduled_for, at("2026-06-01T00:30:00Z"));
        assert_eq!(nightly.key, "nightly#2026-06-01T00:30:00Z");
        let hourly = all.iter().find(|e| e.name == "hourly").unwrap();
        assert_eq!(
            hourly.missed_after - hourly.scheduled_for,
            chrono::Duration::minutes(15)
        );
        assert_eq!(
            hourly.due_by - hourly.scheduled_for,
            chrono::Duration::minutes(20)
        );
    }

    #[test]
    fn across_berlins_clock_changes_no_firing_is_expected_twice_or_invented() {
        // Spring (29 March 2026): 02:30 does not exist that night; autumn (25 October):
        // 02:30 happens twice and runs once. Around each change, one firing a day at most.
        for (from, to, firings) in [
            ("2026-03-28T00:00:00Z", "2026-03-31T00:00:00Z", 2),
            ("2026-10-24T00:00:00Z", "2026-10-27T00:00:00Z", 3),
        ] {
            let nightly: Vec<_> = day(from, to)
                .into_iter()
                .filter(|e| e.name == "nightly")
                .collect();
            assert_eq!(nightly.len(), firings, "{nightly:#?}");
            let mut keys: Vec<_> = nightly.iter().map(|e| e.key.clone()).collect();
            keys.dedup();
            assert_eq!(keys.len(), firings, "{keys:?}");
        }
    }

    #[test]
    fn a_paused_jobs_firings_in_its_pauses_are_not_expected() {
        use crate::store::{PauseHistory, PauseRecord, PauseWindow};
        // Paused from 00:30 to 01:30 (ended), and again since 03:00.
        let history = PauseHistory {
            paused: Some(PauseRecord {
                job: "hourly".into(),
                by: "ops".into(),
                at: "2026-06-01T03:00:00Z".into(),
                reason: "r".into(),
            }),
            ended: vec![PauseWindow {
                from: "2026-06-01T00:30:00.000Z".into(),
                to: "2026-06-01T01:30:00.000Z".into(),
            }],
        };
        let paused = expected(
            &catalog(),
            at("2026-06-01T00:00:00Z"),
            at("2026-06-01T06:00:00Z"),
            Duration::from_secs(600),
            |name, at| name == "hourly" && history.withheld(at),
        );
        let hours: Vec<_> = paused
            .iter()
            .filter(|e| e.name == "hourly")
            .map(|e| e.scheduled_for)
            .collect();
        assert_eq!(
            hours,
            [at("2026-06-01T00:00:00Z"), at("2026-06-01T02:00:00Z")],
            "01:00 fell in the ended pause, 03:00 on in the current one"
        );
    }

    #[test]
    fn a_firing_is_missed_without_a_record_and_late_until_done() {
        let e = &day("2026-06-01T00:00:00Z", "2026-06-02T00:00:00Z")
            .into_iter()
            .find(|e| e.name == "hourly")
            .unwrap();
        let t = |minutes: i64| e.scheduled_for + chrono::Duration::minutes(minutes);
        assert_eq!(verdict(e, None, t(14)), Verdict::NotYet);
        // Another job's record under this firing's key is not its run.
        let mut other = run_of(&e.key, "other-job", t(12));
        other.status = Status::Done;
        assert_eq!(verdict(e, Some(&other), t(15)), Verdict::Missed);
        assert_eq!(verdict(e, None, t(15)), Verdict::Missed);
        let mut record = run_of(&e.key, &e.name, e.scheduled_for);
        assert_eq!(record.status, Status::Running);
        assert_eq!(verdict(e, Some(&record), t(19)), Verdict::Running);
        assert_eq!(verdict(e, Some(&record), t(20)), Verdict::Late);
        record.status = Status::Failed;
        assert_eq!(verdict(e, Some(&record), t(30)), Verdict::Late);
        for ended in [Status::Done, Status::Skipped, Status::Cancelled] {
            record.status = ended;
            assert_eq!(
                verdict(e, Some(&record), t(90)),
                Verdict::Accounted,
                "{ended}"
            );
        }
    }
}
