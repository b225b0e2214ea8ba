//! The accountant's world: six hours of a stage's scheduled jobs, minute by minute, with the
//! accountant's own check ([`check_and_send`]) running over the memory store every few
//! minutes (now and then two at once, now and then not for hours: an outage), its requests
//! refused, their answers lost, or sent twice by the SDK; operators pause and resume jobs,
//! and schedules change between checks. The world fires each job's firings itself (its own
//! minute arithmetic, not the accountant's), losing some (never recorded), leaving some
//! RUNNING for good and finishing some after their deadline.
//!
//! Judged from outside: every firing reported missed is one the world lost (none it fired,
//! none a pause withheld, none a schedule no longer had); every one reported late is one
//! that ran past its deadline; every lost firing is reported, and every run left RUNNING,
//! except those the accountant cannot know of (around a pause's edges, between a resume or
//! a schedule's change and the first check that sees it); a firing reported twice only in
//! a world whose requests can be refused (a check that could not write "sent" leaves its
//! report to the next: at least once); and no ledger write ever refused for its size.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Timelike, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use schedkit::accounting::ledger::Kind;
use schedkit::accounting::stage::check_and_send;
use schedkit::catalog::Catalog;
use schedkit::store::{
    CancelRequest, ClaimOutcome, ClaimRequest, ExecutionRecord, ExecutionStore, Fault, Faults,
    Finish, MemoryStore, PauseRecord, PauseStore, StoreError,
};

/// How long the jobs fire.
const HOURS: i64 = 6;
/// After that, how long the checks go on (past every deadline and grace).
const AFTER: i64 = 120;
/// The schedules' end (they fire before it: the world's last firing minute is 14:55).
const END: &str = "2026-12-02T14:59:00Z";
/// Each job's deadline, as the catalog says it.
const DEADLINE_MINUTES: i64 = 20;
/// A pause's edges are within this of the Scheduler's clock: a firing this close to one is
/// the accountant's to leave unjudged (the contract of `jobs pause` and `jobs resume`).
const EDGE: chrono::Duration = chrono::Duration::minutes(1);

/// The jobs and the two steps (minutes) each one's schedule switches between.
const JOBS: [(&str, [u32; 2]); 4] = [
    ("sync", [5, 15]),
    ("report", [10, 30]),
    ("export", [15, 5]),
    ("hourly", [60, 20]),
];

/// The accountant's requests: the ones that meet faults (the world's own writes do not).
const ACCOUNTANT_REQUESTS: [&str; 6] = [
    "ledger",
    "put_ledger",
    "get_many",
    "scheduled_between",
    "jobs_failed_since",
    "pause_histories",
];

type Rand = Arc<Mutex<StdRng>>;

/// One firing reported: missed or late, its key, when, and by the check settling which
/// count of the ledger.
pub type Sent = (Kind, String, DateTime<Utc>, u64);

/// How long after its time a firing with no record is missed (the accountant's contract:
/// the flexible window, none here, and ten minutes of grace).
const GRACE_MINUTES: i64 = 10;

fn chance(draw: &Rand, p: f64) -> bool {
    draw.lock().unwrap().random_bool(p)
}

fn between(draw: &Rand, lo: i64, hi: i64) -> i64 {
    draw.lock().unwrap().random_range(lo..hi)
}

#[derive(Debug)]
struct AccountantFaults {
    draw: Rand,
    refused: f64,
    lost: f64,
    retried: f64,
}

impl Faults for AccountantFaults {
    fn request(&self, request: &'static str, _: &str) -> (Duration, Fault) {
        if !ACCOUNTANT_REQUESTS.contains(&request) {
            return (Duration::ZERO, Fault::None);
        }
        let delay = Duration::from_millis(between(&self.draw, 1, 50) as u64);
        let fault = if chance(&self.draw, self.refused) {
            Fault::Unavailable
        } else if chance(&self.draw, self.lost) {
            Fault::LoseAnswer
        } else if chance(&self.draw, self.retried) {
            Fault::Retried
        } else {
            Fault::None
        };
        (delay, fault)
    }
}

/// The catalog with each job on the step it is on now.
fn catalog(steps: &BTreeMap<&'static str, u32>) -> Catalog {
    let mut text = String::new();
    for (name, step) in steps {
        let expression = match step {
            60 => "cron(0 * * * ? *)".to_string(),
            s => format!("cron(0/{s} * * * ? *)"),
        };
        text.push_str(&format!(
            "[jobs.{name}]\nowner = \"sim\"\ndeadline = \"{DEADLINE_MINUTES}m\"\n[jobs.{name}.schedule]\nexpression = \"{expression}\"\nend = {END}\n\n"
        ));
    }
    Catalog::parse(&text, "accountant.toml").expect("the accountant world's catalog")
}

/// `scheduled_for` as the trigger layer writes it, in keys and records.
fn instant(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// What happened, for the invariants.
#[derive(Debug, Default)]
pub struct AccountantReport {
    pub trace: Vec<String>,
    /// Firings never recorded (the scheduler or the queue lost them), by key.
    pub lost: BTreeMap<String, (String, DateTime<Utc>)>,
    /// Runs left RUNNING for good, by key.
    pub stuck: BTreeMap<String, (String, DateTime<Utc>)>,
    /// Runs an operator cancelled before their deadline, RUNNING until then.
    pub cancelled: BTreeSet<String>,
    /// Runs DONE after their deadline.
    pub slow: BTreeSet<String>,
    /// Firings fired and DONE in time.
    pub fired: BTreeSet<String>,
    /// Each job's pauses' and resumes' times.
    pub edges: BTreeMap<String, Vec<DateTime<Utc>>>,
    /// Each job's schedule changes: the accountant judges its firings again from the first
    /// check that sees them.
    pub changes: Vec<(String, DateTime<Utc>)>,
    /// Each job's resumes, with the pause each ended: one whose pause a check saw makes
    /// the accountant judge the job again from the first check that sees the resume (one
    /// no check saw paused leaves the pause's window to the ledger).
    pub resumes: Vec<(String, DateTime<Utc>, DateTime<Utc>)>,
    /// Firings that arrived late but within their grace (claimed minutes after), DONE.
    pub delayed: BTreeSet<String>,
    /// Every check: when, and whether it wrote its ledger.
    pub checks: Vec<(DateTime<Utc>, bool)>,
    /// What the checks reported (sent as metrics), in order: kind, key, the check's
    /// instant and the ledger's count of checks it settled.
    pub reported: Vec<Sent>,
    /// Checks that failed, and why.
    pub errors: Vec<String>,
    /// Whether the world's requests could be refused.
    pub refusals: bool,
}

/// Runs the accountant's world of `seed`.
pub async fn run(seed: u64) -> AccountantReport {
    let draw: Rand = Arc::new(Mutex::new(StdRng::seed_from_u64(seed ^ 0xacc0)));
    let refusals = chance(&draw, 0.5);
    let faults = AccountantFaults {
        draw: draw.clone(),
        refused: if refusals { 0.05 } else { 0.0 },
        lost: if chance(&draw, 0.5) { 0.05 } else { 0.0 },
        retried: if chance(&draw, 0.5) { 0.05 } else { 0.0 },
    };
    let store = MemoryStore::new(Arc::new(faults));
    let start: DateTime<Utc> = "2026-12-02T09:00:00Z".parse().unwrap();
    let mut steps: BTreeMap<&'static str, u32> = JOBS.iter().map(|(n, s)| (*n, s[0])).collect();
    let mut paused: BTreeSet<&'static str> = BTreeSet::new();
    // Jobs whose schedule changed since the last check that wrote its ledger.
    let mut unseen_changes: BTreeSet<&'static str> = BTreeSet::new();
    let mut report = AccountantReport {
        refusals,
        ..AccountantReport::default()
    };
    let reported: Arc<Mutex<Vec<Sent>>> = Arc::default();
    // When each paused job was paused.
    let mut paused_at: BTreeMap<&'static str, DateTime<Utc>> = BTreeMap::new();
    // Claims that come minutes after their firing: when, the job, the key, the firing.
    let mut arriving: Vec<(DateTime<Utc>, &'static str, String, DateTime<Utc>)> = Vec::new();
    // Runs to finish later: when, the claimed record, and whether it is late by then.
    let mut finishing: Vec<(DateTime<Utc>, ExecutionRecord)> = Vec::new();
    // Runs an operator cancels: when, and the key.
    let mut cancelling: Vec<(DateTime<Utc>, String)> = Vec::new();
    // The first check at the start (a stage's first check expects nothing before it).
    let mut next_check = start;
    for minute in 0..=(HOURS + AFTER / 60 + 1) * 60 {
        let t = start + chrono::Duration::minutes(minute);
        // Runs that end now.
        let due: Vec<_> = finishing.extract_if(.., |(at, _)| *at <= t).collect();
        for (at, record) in due {
            let done = Finish::Succeeded {
                result: serde_json::Value::Null,
            };
            store.finish(&record, &done, at).await.expect("a finish");
        }
        let due: Vec<_> = cancelling.extract_if(.., |(at, _)| *at <= t).collect();
        for (at, key) in due {
            let cancel = CancelRequest {
                key,
                by: "operator".into(),
                reason: "simulated".into(),
                now: at,
                only: vec![],
                arrived: None,
            };
            store.cancel(&cancel).await.expect("a cancel");
        }
        // Firings that arrive now, minutes late (the queue behind), within their grace.
        let due: Vec<_> = arriving.extract_if(.., |(at, ..)| *at <= t).collect();
        for (at, name, key, fired) in due {
            let record = claim(&store, name, &key, fired, at).await;
            finishing.push((at + chrono::Duration::minutes(1), record));
        }
        // The firings of this minute.
        if minute < HOURS * 60 {
            for (name, step) in &steps {
                let fires = match step {
                    60 => t.minute() == 0,
                    s => t.minute().is_multiple_of(*s),
                };
                if !fires || paused.contains(name) {
                    continue;
                }
                let key = format!("{name}#{}", instant(t));
                let fate = between(&draw, 0, 100);
                if fate < 8 {
                    report.trace.push(format!("{t} {key}: lost"));
                    report.lost.insert(key, (name.to_string(), t));
                    continue;
                }
                if (18..23).contains(&fate) {
                    let at = t + chrono::Duration::minutes(between(&draw, 2, GRACE_MINUTES - 1));
                    report.trace.push(format!("{t} {key}: arrives at {at}"));
                    report.delayed.insert(key.clone());
                    arriving.push((at, name, key, t));
                    continue;
                }
                let claimed_at = t + chrono::Duration::seconds(between(&draw, 1, 50));
                let record = claim(&store, name, &key, t, claimed_at).await;
                if fate < 13 && chance(&draw, 0.4) {
                    // An operator cancels it before its deadline (`executions cancel`): it
                    // is accounted for, never late.
                    let at = t + chrono::Duration::minutes(between(&draw, 2, 15));
                    report.trace.push(format!("{t} {key}: cancelled at {at}"));
                    report.cancelled.insert(key.clone());
                    cancelling.push((at, key));
                } else if fate < 13 {
                    report.trace.push(format!("{t} {key}: left RUNNING"));
                    report.stuck.insert(key, (name.to_string(), t));
                } else if fate < 18 {
                    let at = t + chrono::Duration::minutes(DEADLINE_MINUTES + 5);
                    report.slow.insert(key);
                    finishing.push((at, record));
                } else {
                    let at = t + chrono::Duration::minutes(between(&draw, 1, 6));
                    report.fired.insert(key);
                    finishing.push((at, record));
                }
            }
        }
        // Half a minute past: an operator pauses or resumes a job, or its schedule changes.
        let half = t + chrono::Duration::seconds(30);
        if minute < HOURS * 60 && chance(&draw, 0.02) {
            let name = JOBS[between(&draw, 0, JOBS.len() as i64) as usize].0;
            report.edges.entry(name.to_string()).or_default().push(half);
            if paused.remove(name) {
                store.resume(name, half).await.expect("a resume");
                let since = paused_at.remove(name).expect("paused");
                report.resumes.push((name.to_string(), since, half));
                report.trace.push(format!("{half} {name}: resumed"));
            } else {
                let pause = PauseRecord {
                    job: name.to_string(),
                    by: "operator".into(),
                    at: instant(half),
                    reason: "simulated".into(),
                };
                store.pause(&pause).await.expect("a pause");
                paused.insert(name);
                paused_at.insert(name, half);
                report.trace.push(format!("{half} {name}: paused"));
            }
        }
        // A schedule changed back before any check saw the change would look unchanged to
        // the accountant (its ledger keeps the schedule it last saw, not the changes since),
        // and the firings of the schedule in between would be expected of the one before:
        // a limit of the accountant, so the world changes a schedule again only once a
        // check has seen its last change.
        if minute < HOURS * 60 && chance(&draw, 0.005) {
            let (name, choices) = JOBS[between(&draw, 0, JOBS.len() as i64) as usize];
            if unseen_changes.insert(name) {
                let step = steps.get_mut(name).expect("a job");
                *step = if *step == choices[0] {
                    choices[1]
                } else {
                    choices[0]
                };
                report.changes.push((name.to_string(), half));
                report
                    .trace
                    .push(format!("{half} {name}: schedule now every {step} minutes"));
            }
        }
        // The checks, 45 seconds past the minute.
        if t >= next_check {
            let now = t + chrono::Duration::seconds(45);
            let catalog = catalog(&steps);
            let twice = chance(&draw, 0.1);
            let one = check(&store, &catalog, now, &reported);
            let before = ledger_count(&store);
            let outcomes = if twice {
                let (a, b) = tokio::join!(one, check(&store, &catalog, now, &reported));
                vec![a, b]
            } else {
                vec![one.await]
            };
            for e in outcomes.into_iter().filter_map(Result::err) {
                report.errors.push(format!("{now}: {e}"));
                report.trace.push(format!("{now} check failed: {e}"));
            }
            // Whether a check wrote the ledger, read from the store as a stream of the table
            // shows it, not from the check's answer (a write whose answer was lost is
            // written all the same).
            let written = ledger_count(&store) > before;
            report.checks.push((now, written));
            report
                .trace
                .push(format!("{now} checked: ledger written {written}"));
            if written {
                unseen_changes.clear();
            }
            let gap = match chance(&draw, 0.03) {
                true => between(&draw, 60, 180),
                false => between(&draw, 3, 12),
            };
            next_check = t + chrono::Duration::minutes(gap);
        }
    }
    // The stage's checks go on: one more that writes its ledger, past every deadline.
    let end = start + chrono::Duration::minutes((HOURS + AFTER / 60 + 1) * 60);
    for minute in 1..=30 {
        let now = end + chrono::Duration::minutes(minute);
        let before = ledger_count(&store);
        if let Err(e) = check(&store, &catalog(&steps), now, &reported).await {
            report.errors.push(format!("{now}: {e}"));
            report.trace.push(format!("{now} check failed: {e}"));
        }
        let written = ledger_count(&store) > before;
        report.checks.push((now, written));
        if written {
            break;
        }
    }
    report.reported = std::mem::take(&mut *reported.lock().unwrap());
    report
}

/// The ledger's count of checks as the store holds it (0: none yet), read past its faults.
fn ledger_count(store: &MemoryStore) -> u64 {
    store
        .snapshot()
        .ledger
        .and_then(|item| item.get("checks")?.as_n().ok()?.parse().ok())
        .unwrap_or(0)
}

/// The run `key` of `name`, fired at `t`, claimed at `at`: RUNNING under a lease that
/// outlasts the world.
async fn claim(
    store: &MemoryStore,
    name: &str,
    key: &str,
    t: DateTime<Utc>,
    at: DateTime<Utc>,
) -> ExecutionRecord {
    let request = ClaimRequest {
        key: key.to_string(),
        job: name.to_string(),
        scheduled_for: instant(t),
        payload_hash: "h".into(),
        input: "{}".into(),
        message_id: None,
        owner: format!("w:{key}"),
        now: at,
        lease: Duration::from_secs(24 * 3600),
        retention: Duration::from_secs(30 * 24 * 3600),
        redrive: None,
    };
    match store.claim(&request).await.expect("a claim") {
        ClaimOutcome::Claimed { record, .. } => record,
        other => panic!("{key}: a new key's claim answered {other:?}"),
    }
}

/// One check of the stage at `now`, its report kept as sent.
async fn check(
    store: &MemoryStore,
    catalog: &Catalog,
    now: DateTime<Utc>,
    reported: &Arc<Mutex<Vec<Sent>>>,
) -> Result<(), StoreError> {
    check_and_send(store, catalog, now, None, |c| {
        let mut sent = reported.lock().unwrap();
        sent.extend(
            c.reported
                .iter()
                .map(|f| (f.kind, f.key.clone(), c.now, c.checks)),
        );
    })
    .await?;
    Ok(())
}

/// Every invariant `report` breaks, said.
pub fn check_report(report: &AccountantReport) -> Vec<String> {
    let mut broken = Vec::new();
    let grace = chrono::Duration::minutes(GRACE_MINUTES);
    let deadline = chrono::Duration::minutes(DEADLINE_MINUTES);
    let fired_at = |key: &str| -> Option<DateTime<Utc>> {
        let at = key.split_once('#')?.1;
        DateTime::parse_from_rfc3339(at).ok().map(|t| t.to_utc())
    };
    for (kind, key, at, _) in &report.reported {
        let ran = report.fired.contains(key) || report.slow.contains(key);
        let wrong = match kind {
            Kind::Missed if report.lost.contains_key(key) => None,
            Kind::Missed if ran || report.delayed.contains(key) => Some("it ran"),
            Kind::Missed if report.stuck.contains_key(key) || report.cancelled.contains(key) => {
                Some("it has a record")
            }
            Kind::Missed => Some("the world never fired it (paused, or not on its schedule then)"),
            Kind::Late if report.stuck.contains_key(key) || report.slow.contains(key) => None,
            Kind::Late if report.cancelled.contains(key) => {
                Some("an operator cancelled it before its deadline")
            }
            Kind::Late => Some("it was DONE in time or never ran"),
        };
        if let Some(wrong) = wrong {
            broken.push(format!("{key} reported {kind:?} at {at}, but {wrong}"));
            continue;
        }
        // Never before its time: missed once its grace is over, late once its deadline.
        let wait = match kind {
            Kind::Missed => grace,
            Kind::Late => deadline,
        };
        if fired_at(key).is_some_and(|t| *at < t + wait) {
            broken.push(format!(
                "{key} reported {kind:?} at {at}, before it could be"
            ));
        }
    }
    // Twice only when requests could be refused (a check that could not say it sent its
    // report leaves it to the next), or by two checks that wrote one after the other (the
    // second read the ledger before the first said it sent): never by two checks that
    // settled the same count of the ledger (one of them did not write it).
    let mut first: BTreeMap<(&str, &String), u64> = BTreeMap::new();
    for (kind, key, at, checks) in &report.reported {
        let kind_name = match kind {
            Kind::Missed => "missed",
            Kind::Late => "late",
        };
        if let Some(earlier) = first.insert((kind_name, key), *checks)
            && !report.refusals
            && earlier == *checks
        {
            broken.push(format!(
                "{key} reported {kind_name} twice (at {at}) by two checks that settled the ledger's check {checks}, in a world whose requests were never refused"
            ));
        }
    }
    let reported = |kind: Kind| -> BTreeSet<&String> {
        report
            .reported
            .iter()
            .filter(|(k, ..)| *k == kind)
            .map(|(_, key, ..)| key)
            .collect()
    };
    let (missed, late) = (reported(Kind::Missed), reported(Kind::Late));
    for (key, (name, t)) in &report.lost {
        if !missed.contains(key) && !unknowable(report, name, *t, grace) {
            broken.push(format!("{key} was lost and never reported missed"));
        }
    }
    for (key, (name, t)) in &report.stuck {
        if !late.contains(key) && !unknowable(report, name, *t, deadline) {
            broken.push(format!("{key} was left RUNNING and never reported late"));
        }
    }
    for e in &report.errors {
        if e.contains("maximum allowed size") {
            broken.push(format!("a check's ledger was too large to write: {e}"));
        }
    }
    if report.checks.iter().filter(|(_, w)| *w).count() < 2 {
        broken.push("fewer than two checks wrote their ledger".into());
    }
    broken
}

/// Whether the accountant could not know of the firing of `name` at `t`, which turns missed
/// or late `wait` after it: before the first check that wrote its ledger; within a minute
/// of one of its pause's edges; or around a schedule's change, or a resume whose pause a
/// check saw: fired between the last check before it and the first check that wrote its
/// ledger after it (the accountant judges such a job again from the check that sees it),
/// or fired before it and judged only after it.
fn unknowable(
    report: &AccountantReport,
    name: &str,
    t: DateTime<Utc>,
    wait: chrono::Duration,
) -> bool {
    let written = || report.checks.iter().filter(|(_, w)| *w).map(|(c, _)| *c);
    let written_from = |from: DateTime<Utc>| {
        written()
            .filter(|c| *c >= from)
            .min()
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    };
    // The check that judges the firing: the first written one once it can be missed or late.
    let judged = written_from(t + wait);
    let near_edge = report
        .edges
        .get(name)
        .is_some_and(|edges| edges.iter().any(|e| (t - *e).abs() <= EDGE));
    let seen_resumes = report
        .resumes
        .iter()
        .filter(|(n, paused, resumed)| n == name && written().any(|c| *paused < c && c < *resumed))
        .map(|(_, _, resumed)| *resumed);
    let changes = report
        .changes
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, at)| *at);
    let unseen = changes.chain(seen_resumes).any(|at| {
        let before = report
            .checks
            .iter()
            .map(|(c, _)| *c)
            .filter(|c| *c <= at)
            .max()
            .unwrap_or(at);
        let seen = written_from(at + chrono::Duration::milliseconds(1));
        (before <= t && t <= seen) || (t <= at && at <= judged)
    });
    // A stage's first check expects nothing before it.
    let before_first = written().next().is_none_or(|c| t <= c);
    near_edge || unseen || before_first
}
