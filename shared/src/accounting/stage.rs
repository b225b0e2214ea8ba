//! The accountant's reading of a stage: the firings the catalog expected in a window
//! ([`super::expected`]), each looked up by its key (a hundred to a request,
//! [`DynamoStore::get_many`]), or, for a job with a key template, among its records through
//! the `by-job` index ([`DynamoStore::scheduled_between`]: paged by scheduled time; nothing
//! scans the table), and what is missed or late at `now` ([`account`]); and the check the stage
//! runs every few minutes ([`check`]), which carries its judgement from one check to the
//! next in the ledger ([`crate::accounting::ledger`]) so each firing is reported once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::books::AccountantStore;
use super::ledger::{self, Finding};
use super::{Expected, Verdict};
use crate::catalog::Catalog;
use crate::store::{DynamoStore, ExecutionRecord, PauseHistory, PauseRecord, Status, StoreError};

/// How long after its flexible window a firing may still arrive before it is missed: the
/// scheduler's delivery retries and a queue that is behind.
pub const GRACE: Duration = Duration::from_secs(10 * 60);

/// Jobs read at once by a check.
const QUERIES_AT_ONCE: usize = 8;

/// A firing that is missed or late.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unaccounted {
    /// The job's or chain's name.
    pub name: String,
    /// Its run's key (`<name>#<scheduled time>`).
    pub key: String,
    /// When it was due.
    pub scheduled_for: String,
    /// When it had to be DONE.
    pub due_by: String,
    /// Its record's status; None when it has none (missed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
}

/// The stage's firings in a window, accounted for.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Account {
    /// Firings the catalog expected.
    pub expected: usize,
    /// Expected, with no record past their window and grace.
    pub missed: Vec<Unaccounted>,
    /// Recorded, not DONE past their deadline.
    pub late: Vec<Unaccounted>,
    /// Queries made (one page each).
    pub queries: usize,
}

/// The firings due in `[from, to)` accounted for at `now`; a job paused now is not expected
/// from its pause on.
pub async fn account(
    store: &DynamoStore,
    catalog: &Catalog,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
    paused: &[PauseRecord],
) -> Result<Account, StoreError> {
    let history: BTreeMap<String, PauseHistory> = paused
        .iter()
        .map(|p| {
            let h = PauseHistory {
                paused: Some(p.clone()),
                ended: Vec::new(),
            };
            (p.job.clone(), h)
        })
        .collect();
    let expected = super::expected(catalog, from, to, GRACE, withheld(&history));
    let span = read_records(store, catalog, expected, to).await?;
    let mut account = Account {
        expected: span.expected.len(),
        queries: span.queries,
        ..Account::default()
    };
    for e in &span.expected {
        let record = span.found.get(&e.key);
        match super::verdict(e, record, now) {
            Verdict::Missed => account.missed.push(unaccounted(e, None)),
            Verdict::Late => account.late.push(unaccounted(e, record.map(|r| r.status))),
            Verdict::NotYet | Verdict::Running | Verdict::Accounted => {}
        }
    }
    Ok(account)
}

/// The firings expected in `[from, to)` and their records, by key.
struct Span {
    expected: Vec<Expected>,
    found: HashMap<String, ExecutionRecord>,
    queries: usize,
}

/// Whether a pause withheld the firing of `name` at `at`: the job is paused since before
/// it, or it fell in a pause ended since.
fn withheld(history: &BTreeMap<String, PauseHistory>) -> impl Fn(&str, DateTime<Utc>) -> bool + '_ {
    |name: &str, at: DateTime<Utc>| history.get(name).is_some_and(|h| h.withheld(at))
}

/// The records of the `expected` firings: by key, a hundred to a request, for the firings
/// whose run has the key they are expected under (`<name>#<scheduled time>`); through the
/// `by-job` index for a job with a key template (its runs have other keys), each such job
/// read from its own earliest firing (a job with a long deadline does not make every job's
/// span long). Requests grow with the firings, not with the catalog's jobs.
async fn read_records<S: AccountantStore>(
    store: &S,
    catalog: &Catalog,
    expected: Vec<Expected>,
    to: DateTime<Utc>,
) -> Result<Span, StoreError> {
    let templated = |name: &str| {
        catalog
            .job(name)
            .is_some_and(|j| j.policy.key_template.is_some())
    };
    let mut spans: HashMap<String, DateTime<Utc>> = HashMap::new();
    let mut keys = Vec::new();
    for e in &expected {
        if templated(&e.name) {
            let from = spans.entry(e.name.clone()).or_insert(e.scheduled_for);
            *from = (*from).min(e.scheduled_for);
        } else {
            keys.push(e.key.clone());
        }
    }
    let (mut found, mut queries) = store.get_many(keys).await?;
    // A few templated jobs' queries at once: a check's time is their round trips.
    let mut reads = tokio::task::JoinSet::new();
    let mut names = spans.into_iter();
    let mut all = Vec::new();
    loop {
        while reads.len() < QUERIES_AT_ONCE {
            let Some((name, from)) = names.next() else {
                break;
            };
            let store = store.clone();
            reads.spawn(async move { store.scheduled_between(&name, from, to).await });
        }
        let Some(read) = reads.join_next().await else {
            break;
        };
        let (records, pages) = read.expect("a query task does not panic")?;
        queries += pages;
        all.extend(records);
    }
    for r in all {
        // A job with a key template runs its firings under other keys: its record is
        // found by job and scheduled time instead (the key a firing has without one).
        // Only such a job's: a chain step's record has its job and its chain's time, and
        // must not stand for the job's own firing at that time.
        if templated(&r.job)
            && let Ok(t) = DateTime::parse_from_rfc3339(&r.scheduled_for)
        {
            let derived = format!(
                "{}#{}",
                r.job,
                crate::envelope::format_instant(&t.with_timezone(&Utc))
            );
            found.entry(derived).or_insert_with(|| r.clone());
        }
        found.insert(r.execution_key.clone(), r);
    }
    Ok(Span {
        expected,
        found,
        queries,
    })
}

/// How far back a check looks for FAILED runs for the failure storm (`FailingJobs`): two of
/// the storm alarm's 5-minute periods, so a failure the index shows late (it is eventually
/// consistent) is still counted by the next check. A gauge: a job failing in both checks'
/// windows counts in each, and the alarm takes the maximum.
pub const STORM_WINDOW: std::time::Duration = std::time::Duration::from_secs(600);

/// One check of a stage.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Firings that turned missed or late after `since` were judged.
    pub since: DateTime<Utc>,
    /// When the check ran.
    pub now: DateTime<Utc>,
    /// Firings expected in the span the check read.
    pub expected: usize,
    /// Firings found missed or late by this check: each reported once (the metrics).
    pub reported: Vec<Finding>,
    /// Every firing missed or late now (`schedkit status`).
    pub findings: Vec<Finding>,
    /// Jobs (and chains) with a run that ended FAILED in the last [`STORM_WINDOW`]: with
    /// the names of `reported`, what the failure storm counts.
    pub failed_jobs: BTreeSet<String>,
    /// DynamoDB requests the check made.
    pub requests: usize,
    /// Whether the ledger was written: false for a look (no commit), and when another
    /// check wrote it first (that one reports this span, and this check nothing).
    pub written: bool,
    /// What the check trimmed to keep the ledger within one item (a long outage).
    pub overflow: ledger::Overflow,
    /// The ledger's count of checks this check settled (the one it read, plus one): two
    /// checks that report the same firing with different counts wrote one after the other
    /// (the second read the ledger before the first said it sent its report).
    pub checks: u64,
}

/// Checks the stage at `now`: the firings that turned missed or late since the last check
/// (or since `override_since`, to account a span again), with the ledger carried forward
/// and, with `commit`, written back if no other check wrote it meanwhile (the stage's own
/// check, whose metrics are the alarms'). Without `commit` it is a look: nothing written,
/// so a check run elsewhere (an operator's terminal) takes no report from the alarms.
/// A committed check's report is taken as sent when it returns ([`check_and_send`] sends
/// it first).
pub async fn check<S: AccountantStore>(
    store: &S,
    catalog: &Catalog,
    now: DateTime<Utc>,
    override_since: Option<DateTime<Utc>>,
    commit: bool,
) -> Result<Check, StoreError> {
    match commit {
        true => check_and_send(store, catalog, now, override_since, |_| {}).await,
        false => settle_check(store, catalog, now, override_since, false)
            .await
            .map(|(check, _)| check),
    }
}

/// The stage's check ([`check`] with its commit), its report handed to `send` (the
/// metrics) once the ledger is written, then the ledger told it was sent. A check that
/// stops between the write and that last write (killed, or its write's answer lost) leaves
/// its report in the ledger's `unsent`, and the next check sends it again: each firing is
/// reported at least once (before, such a report was lost for good: the next check found
/// it judged). One `PutItem` more per check that reported something.
pub async fn check_and_send<S: AccountantStore>(
    store: &S,
    catalog: &Catalog,
    now: DateTime<Utc>,
    override_since: Option<DateTime<Utc>>,
    send: impl FnOnce(&Check),
) -> Result<Check, StoreError> {
    let (mut check, written) = settle_check(store, catalog, now, override_since, true).await?;
    send(&check);
    if let Some(ledger) = written.filter(|l| !l.unsent.is_empty()) {
        // Refused (another check wrote since: it sends what it found unsent) or lost: the
        // report stands either way.
        match store
            .put_ledger(&ledger::sent(&ledger), ledger.checks)
            .await
        {
            Ok(_) => check.requests += 1,
            Err(e) => {
                tracing::warn!(error = %e, "the accountant's ledger does not say its report was sent: the next check sends it again")
            }
        }
    }
    Ok(check)
}

/// One check, and the ledger it wrote (None: a look, or another check wrote first).
async fn settle_check<S: AccountantStore>(
    store: &S,
    catalog: &Catalog,
    now: DateTime<Utc>,
    override_since: Option<DateTime<Utc>>,
    commit: bool,
) -> Result<(Check, Option<ledger::Ledger>), StoreError> {
    let previous = store.ledger().await?;
    let since = ledger::since(previous.as_ref(), override_since, now);
    let previous = previous.unwrap_or_default();
    let from = ledger::span(catalog, GRACE, since);
    let names = catalog.jobs.keys().chain(catalog.chains.keys());
    let history = store.pause_histories(names.cloned().collect()).await?;
    let paused_names: BTreeSet<&str> = history
        .iter()
        .filter(|(_, h)| h.paused.is_some())
        .map(|(name, _)| name.as_str())
        .collect();
    let watched = ledger::watch(&previous, catalog, &paused_names, since, now);
    let known: BTreeSet<&str> = previous.findings.iter().map(|f| f.key.as_str()).collect();
    // Only what this check can judge: a firing known to the ledger, or one whose window or
    // deadline ends after the last check.
    let expected: Vec<Expected> = super::expected(catalog, from, now, GRACE, withheld(&history))
        .into_iter()
        .filter(|e| ledger::is_watched(&watched, e))
        .filter(|e| known.contains(e.key.as_str()) || e.missed_after.max(e.due_by) > since)
        .collect();
    let span = read_records(store, catalog, expected, now).await?;
    // A trailing window, not `since`: the storm is jobs failing together now, whatever
    // span this check catches up on (after an outage, a day's failures are no storm).
    let storm_from = now - chrono::Duration::from_std(STORM_WINDOW).expect("minutes");
    let (failed_jobs, failed_pages) = store.jobs_failed_since(storm_from).await?;
    let mut requests =
        2 + span.queries + failed_pages + (catalog.jobs.len() + catalog.chains.len()).div_ceil(50);
    let in_span: BTreeSet<&str> = span.expected.iter().map(|e| e.key.as_str()).collect();
    let outside: Vec<String> = previous
        .findings
        .iter()
        .filter(|f| !in_span.contains(f.key.as_str()))
        .map(|f| f.key.clone())
        .collect();
    let (mut records, made) = store.get_many(outside.clone()).await?;
    requests += made;
    let earlier: HashMap<String, Option<ExecutionRecord>> = outside
        .into_iter()
        .map(|k| {
            let r = records.remove(&k);
            (k, r)
        })
        .collect();
    let mut settled = ledger::settle(
        &previous,
        since,
        now,
        &span.expected,
        &span.found,
        &earlier,
        watched,
    );
    settled.ledger.writer = uuid::Uuid::new_v4().to_string();
    let written = commit && store.put_ledger(&settled.ledger, previous.checks).await?;
    let check = Check {
        since,
        now,
        expected: span.expected.len(),
        // A look without a commit says what a check would report; a written one reports
        // with it what the last check may not have sent; one that lost the race reports
        // nothing (the other check did).
        reported: match (commit, written) {
            (false, _) => settled.reported,
            (true, true) => settled.to_send.clone(),
            (true, false) => Vec::new(),
        },
        findings: settled.ledger.findings.clone(),
        failed_jobs,
        requests,
        written,
        overflow: settled.overflow,
        checks: settled.ledger.checks,
    };
    Ok((check, written.then_some(settled.ledger)))
}

fn unaccounted(e: &Expected, status: Option<Status>) -> Unaccounted {
    let text = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    Unaccounted {
        name: e.name.clone(),
        key: e.key.clone(),
        scheduled_for: text(e.scheduled_for),
        due_by: text(e.due_by),
        status,
    }
}
