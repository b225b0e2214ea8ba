//! The accountant's memory between checks, and what one check reports. A check runs every
//! few minutes; each expected firing must be reported once when it turns missed or late
//! (the metric, and the alarm on it), and listed while it stays so (`schedkit status`), no
//! longer once its run is DONE. So the ledger keeps how far the checks have judged (the
//! watermark) and the firings still unaccounted for; [`settle`] folds one check's reading
//! into it.
//!
//! Pure: the caller reads the records in the check's window (by job, scheduled time) and
//! the ones the ledger holds from before it (by key), and says what time it is.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Expected, Verdict, verdict};
use crate::catalog::Catalog;
use crate::store::{ExecutionRecord, Status};

/// How long a missed firing stays listed after it was found (a day of `status`); a late
/// one stays while its run is not DONE, for [`KEEP_LATE`] at most.
pub const KEEP_MISSED: Duration = Duration::from_secs(24 * 3600);
/// The longest a late run stays listed.
pub const KEEP_LATE: Duration = Duration::from_secs(7 * 24 * 3600);
/// The longest span one check judges: an accountant quiet for longer (its alarm says so)
/// does not page a week of firings at once when it comes back; the span before is lost
/// to the check, not to the records (`schedkit executions list` still shows them).
pub const LONGEST_SPAN: Duration = Duration::from_secs(2 * 24 * 3600);
/// The most findings the ledger keeps (one item of the table holds it), newest first.
pub const MOST_FINDINGS: usize = 500;
/// The most bytes the ledger's text may take: DynamoDB refuses an item over 400 KB, and
/// the ledger's key, its count of checks and the attribute names take a few dozen more.
/// Past it, the oldest reported keys are forgotten first (a forgotten firing could be
/// reported again only if a check judged its span again), then the oldest findings.
pub const MOST_LEDGER_BYTES: usize = 390 * 1024;

/// Why a firing is unaccounted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// No record past its window and grace.
    Missed,
    /// A record not DONE past its deadline.
    Late,
}

/// One firing unaccounted for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Missed or late.
    pub kind: Kind,
    /// The job's or chain's name.
    pub name: String,
    /// Whether it is a chain's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub chain: bool,
    /// Its run's key (`<name>#<scheduled time>`).
    pub key: String,
    /// When it was due, RFC 3339.
    pub scheduled_for: DateTime<Utc>,
    /// When it had to be DONE.
    pub due_by: DateTime<Utc>,
    /// Its record's status when last looked at; None when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// The check that first found it so.
    pub found_at: DateTime<Utc>,
}

/// What the checks remember: how far they have judged, and what is still unaccounted for.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Ledger {
    /// Every firing that turned missed or late up to here has been reported.
    pub checked_to: Option<DateTime<Utc>>,
    /// Checks made; each write of the ledger is conditioned on it (two checks at once:
    /// one reports, the other's write is refused and it reports nothing).
    pub checks: u64,
    /// Firings missed or late now, oldest first.
    pub findings: Vec<Finding>,
    /// Findings dropped beyond [`MOST_FINDINGS`] or [`MOST_LEDGER_BYTES`], over the
    /// ledger's life.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
    /// Reported keys forgotten early to keep within [`MOST_LEDGER_BYTES`], over the
    /// ledger's life.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub forgotten: u64,
    /// Since when each scheduled job and chain has been expected: its first check, or the
    /// first check that found it resumed. The firings of a schedule added, enabled or
    /// resumed between two checks are not expected from before it was (they never were).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub watched: BTreeMap<String, Watched>,
    /// The firings reported lately (key → when): a firing is reported once, whatever it
    /// was found (missed, then late when its run came after all).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reported: BTreeMap<String, DateTime<Utc>>,
    /// What the check that wrote this ledger reports, until it says it has sent it (its
    /// metrics emitted: [`sent`]). A check that finds them here sends them again with its
    /// own: their writer stopped, or lost its write's answer, between the write and the
    /// send. So a firing is reported at least once; twice when a check stopped half-way,
    /// or when another check read the ledger between its write and its note. Trimmed last
    /// but for the findings when the item is full: the check that wrote it sends the whole
    /// report all the same ([`Settled::to_send`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsent: Vec<Finding>,
    /// The check that wrote it (a random id): a write refused by its own first try (the
    /// SDK sent it again) is this check's, and one refused by another check's is not,
    /// though two checks at the same instant settle the same ledger to the byte (the
    /// simulation's accountant world found both taking it as written, and both reporting).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub writer: String,
}

/// The ledger once its `unsent` findings were sent: the same, without them (written on
/// the condition that no check wrote since).
pub fn sent(ledger: &Ledger) -> Ledger {
    Ledger {
        unsent: Vec::new(),
        ..ledger.clone()
    }
}

/// A name the checks watch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watched {
    /// Its firings from here on are expected.
    pub since: DateTime<Utc>,
    /// Paused at the last check: its resume is seen at the next.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// What its firings were computed from at the last check (expression, zone, start, end,
    /// window): a schedule changed since is expected from the check that sees the change,
    /// not from before it (its new firings before then were never fired). None in a ledger
    /// written before this was kept: taken as unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

/// What a schedule's firings are computed from, as a stable hash: 16 characters per job
/// in the ledger's one item, however long the expression.
fn fingerprint(spec: &crate::catalog::model::ScheduleSpec) -> String {
    let instant = |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339()).unwrap_or_default();
    let text = format!(
        "{} | {} | {} | {} | {}",
        spec.expression,
        spec.timezone,
        instant(spec.start),
        instant(spec.end),
        spec.flexible_window_minutes
    );
    format!("{:016x}", crate::hash::stable_hash([text.as_bytes()]))
}

/// How long a reported firing's key is remembered: longer than any span a check reads.
const REMEMBER_REPORTED: Duration = Duration::from_secs(3 * 24 * 3600);
/// The most reported keys remembered, newest kept.
const MOST_REPORTED: usize = 5000;

/// Whether `e` is expected by the checks: its name is watched, and since before it.
pub fn is_watched(watched: &BTreeMap<String, Watched>, e: &Expected) -> bool {
    watched
        .get(&e.name)
        .is_some_and(|w| e.scheduled_for >= w.since)
}

/// The names the checks watch after a check at `now` judging from `since`: every enabled
/// scheduled job and chain of `catalog`, from when it was first seen (a stage's first
/// check: `since`; later, `now`) or seen resumed (`now`); `paused` are paused now.
pub fn watch(
    previous: &Ledger,
    catalog: &Catalog,
    paused: &BTreeSet<&str>,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> BTreeMap<String, Watched> {
    let enabled = |spec: &Option<crate::catalog::model::ScheduleSpec>| {
        spec.as_ref().filter(|s| s.enabled).map(fingerprint)
    };
    let jobs = catalog
        .jobs
        .values()
        .filter(|j| j.schedule.is_some())
        .filter_map(|j| Some((j.name.as_str(), enabled(&j.spec.schedule)?)));
    let chains = catalog
        .chains
        .values()
        .filter(|c| c.schedule.is_some())
        .filter_map(|c| Some((c.name.as_str(), enabled(&c.spec.schedule)?)));
    let first_check = previous.checks == 0;
    jobs.chain(chains)
        .map(|(name, schedule)| {
            let is_paused = paused.contains(name);
            let from = match previous.watched.get(name) {
                Some(w) if w.paused && !is_paused => now, // resumed since the last check
                // Its schedule changed since the last check.
                Some(w) if w.schedule.as_ref().is_some_and(|s| *s != schedule) => now,
                Some(w) => w.since,
                None if first_check => since,
                None => now,
            };
            (
                name.to_string(),
                Watched {
                    since: from,
                    paused: is_paused,
                    schedule: Some(schedule),
                },
            )
        })
        .collect()
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One check's judgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The ledger to write.
    pub ledger: Ledger,
    /// Firings that turned missed or late since the last check: each reported once.
    pub reported: Vec<Finding>,
    /// What the check sends once its ledger is written: `reported`, with what the last
    /// check may not have sent (its `unsent`), whole (the ledger's `unsent`, which only
    /// lets the next check send it again, may have been trimmed to fit).
    pub to_send: Vec<Finding>,
    /// What this check trimmed to keep the ledger within one item.
    pub overflow: Overflow,
}

/// What one check trimmed from the ledger to keep it within [`MOST_LEDGER_BYTES`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Overflow {
    /// Findings dropped (no longer listed by `schedkit status`).
    pub dropped: u64,
    /// Reported keys forgotten early.
    pub forgotten: u64,
    /// Reports sent by this check but not kept to be sent again, should it stop before it
    /// says they were sent.
    pub unkept: u64,
}

/// The span of scheduled times a check at `now` must read, having judged up to `since`:
/// every firing whose window or deadline ends after `since` (the longest wait the catalog
/// has, [`longest_wait`], before it).
pub fn span(catalog: &Catalog, grace: Duration, since: DateTime<Utc>) -> DateTime<Utc> {
    since - chrono::Duration::from_std(longest_wait(catalog, grace)).unwrap_or_default()
}

/// The longest a firing of the catalog can be waited for: its window and the grace, or
/// its deadline, whichever is longer.
pub fn longest_wait(catalog: &Catalog, grace: Duration) -> Duration {
    let window = |minutes: Option<u32>| Duration::from_secs(u64::from(minutes.unwrap_or(0)) * 60);
    let jobs = catalog.jobs.values().filter_map(|j| {
        let spec = j.spec.schedule.as_ref()?;
        Some((j.deadline()?, window(Some(spec.flexible_window_minutes))))
    });
    let chains = catalog.chains.values().filter_map(|c| {
        let spec = c.spec.schedule.as_ref()?;
        Some((
            c.deadline(catalog)?,
            window(Some(spec.flexible_window_minutes)),
        ))
    });
    jobs.chain(chains)
        .map(|(deadline, window)| deadline.max(window + grace))
        .max()
        .unwrap_or(grace)
}

/// Where a check starts: the ledger's watermark (or `override_since`, to account a span
/// again), never more than [`LONGEST_SPAN`] back; a stage's first check starts at `now`:
/// nothing before it was expected.
pub fn since(
    ledger: Option<&Ledger>,
    override_since: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    let from = override_since
        .or_else(|| ledger.and_then(|l| l.checked_to))
        .unwrap_or(now);
    let earliest = now - chrono::Duration::from_std(LONGEST_SPAN).unwrap_or_default();
    from.clamp(earliest, now)
}

/// The ledger's findings from before the check's span, looked up again (`earlier`): a
/// missed one kept for [`KEEP_MISSED`] while it has no run, a late one while its run is
/// not ended (for [`KEEP_LATE`] at most).
fn carried(
    previous: &Ledger,
    in_span: &BTreeSet<&str>,
    earlier: &HashMap<String, Option<ExecutionRecord>>,
    now: DateTime<Utc>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for f in &previous.findings {
        if in_span.contains(f.key.as_str()) {
            continue; // judged again above
        }
        let Some(record) = earlier.get(&f.key) else {
            out.push(f.clone()); // not looked up: kept as it was
            continue;
        };
        let kept = match record {
            None => (now - f.found_at).to_std().unwrap_or_default() < KEEP_MISSED,
            Some(r) => {
                !matches!(r.status, Status::Done | Status::Skipped | Status::Cancelled)
                    && (now - f.found_at).to_std().unwrap_or_default() < KEEP_LATE
            }
        };
        if kept {
            let mut f = f.clone();
            if let Some(r) = record {
                f.kind = Kind::Late;
                f.status = Some(r.status);
            }
            out.push(f);
        }
    }
    out
}

/// Forgets the reported keys older than [`REMEMBER_REPORTED`], and the oldest beyond
/// [`MOST_REPORTED`].
fn forget_old(remembered: &mut BTreeMap<String, DateTime<Utc>>, now: DateTime<Utc>) {
    let forget = now - chrono::Duration::from_std(REMEMBER_REPORTED).unwrap_or_default();
    remembered.retain(|_, at| *at > forget);
    if remembered.len() > MOST_REPORTED {
        let mut by_age: Vec<(DateTime<Utc>, String)> =
            remembered.iter().map(|(k, at)| (*at, k.clone())).collect();
        by_age.sort();
        for (_, key) in by_age.into_iter().take(remembered.len() - MOST_REPORTED) {
            remembered.remove(&key);
        }
    }
}

/// The ledger's text, as the store writes it.
pub fn text(ledger: &Ledger) -> String {
    serde_json::to_string(ledger).expect("a ledger serialises")
}

/// Trims `ledger` to [`MOST_LEDGER_BYTES`]: the oldest reported keys, then the oldest
/// findings, an eighth at a time, each counted. What the check had to drop, as
/// (findings, reported keys).
fn fit(ledger: &mut Ledger) -> Overflow {
    let (mut findings, mut keys, mut unsent) = (0u64, 0u64, 0u64);
    while text(ledger).len() > MOST_LEDGER_BYTES {
        if !ledger.reported.is_empty() {
            let mut by_age: Vec<(DateTime<Utc>, String)> = ledger
                .reported
                .iter()
                .map(|(k, at)| (*at, k.clone()))
                .collect();
            by_age.sort();
            let n = by_age.len().div_ceil(8);
            for (_, key) in by_age.into_iter().take(n) {
                ledger.reported.remove(&key);
            }
            keys += n as u64;
        } else if !ledger.unsent.is_empty() {
            // This check sends them all the same ([`Settled::to_send`]): trimmed, they are
            // only not sent again should it stop before it says they were sent.
            let n = ledger.unsent.len().div_ceil(8);
            ledger.unsent.drain(..n);
            unsent += n as u64;
        } else if !ledger.findings.is_empty() {
            let n = ledger.findings.len().div_ceil(8);
            ledger.findings.drain(..n);
            findings += n as u64;
        } else {
            break; // only what every job needs (`watched`) is left
        }
    }
    ledger.dropped += findings;
    ledger.forgotten += keys;
    Overflow {
        dropped: findings,
        forgotten: keys,
        unkept: unsent,
    }
}

/// Folds one check into the ledger. `expected` are the firings in the check's span
/// ([`span`] to `now`), `found` their records by key; `earlier` the records (by key,
/// None: still none) of the ledger's findings from before the span.
pub fn settle(
    previous: &Ledger,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    expected: &[Expected],
    found: &HashMap<String, ExecutionRecord>,
    earlier: &HashMap<String, Option<ExecutionRecord>>,
    watched: BTreeMap<String, Watched>,
) -> Settled {
    let mut remembered = previous.reported.clone();
    let known: HashMap<&str, &Finding> = previous
        .findings
        .iter()
        .map(|f| (f.key.as_str(), f))
        .collect();
    let in_span: BTreeSet<&str> = expected.iter().map(|e| e.key.as_str()).collect();
    let mut findings = Vec::new();
    let mut reported = Vec::new();
    for e in expected {
        let record = found.get(&e.key);
        let (kind, turned_at) = match verdict(e, record, now) {
            Verdict::Missed => (Kind::Missed, e.missed_after),
            Verdict::Late => (Kind::Late, e.due_by),
            Verdict::NotYet | Verdict::Running | Verdict::Accounted => continue,
        };
        let earlier_finding = known.get(e.key.as_str());
        // Judged by the checks only from when it turned so after the last one (before the
        // first check, nothing was expected); a firing they know stays theirs.
        let new = earlier_finding.is_none()
            && turned_at > since
            && !previous.reported.contains_key(e.key.as_str());
        let reported_before = previous.reported.contains_key(e.key.as_str());
        if earlier_finding.is_none() && !new && !reported_before {
            continue;
        }
        let finding = Finding {
            kind,
            name: e.name.clone(),
            chain: e.chain,
            key: e.key.clone(),
            scheduled_for: e.scheduled_for,
            due_by: e.due_by,
            status: record.map(|r| r.status),
            found_at: earlier_finding.map_or(now, |f| f.found_at),
        };
        // Reported once: when it turned so (missed, or late: a missed firing whose run
        // came after all and is late is the same firing, reported already).
        if new {
            remembered.insert(finding.key.clone(), now);
            reported.push(finding.clone());
        }
        findings.push(finding);
    }
    findings.extend(carried(previous, &in_span, earlier, now));
    findings.sort_by(|a, b| (a.scheduled_for, &a.name).cmp(&(b.scheduled_for, &b.name)));
    findings.dedup_by(|a, b| a.key == b.key);
    let mut dropped = previous.dropped;
    if findings.len() > MOST_FINDINGS {
        let excess = findings.len() - MOST_FINDINGS;
        findings.drain(..excess);
        dropped += excess as u64;
    }
    forget_old(&mut remembered, now);
    // What this check reports, with what the last one may not have sent.
    let mut to_send = previous.unsent.clone();
    let carried: BTreeSet<String> = to_send.iter().map(|f| f.key.clone()).collect();
    to_send.extend(
        reported
            .iter()
            .filter(|f| !carried.contains(&f.key))
            .cloned(),
    );
    let mut ledger = Ledger {
        checked_to: Some(now.max(previous.checked_to.unwrap_or(now))),
        checks: previous.checks + 1,
        findings,
        dropped,
        forgotten: previous.forgotten,
        watched,
        reported: remembered,
        unsent: to_send.clone(),
        writer: String::new(),
    };
    let overflow = fit(&mut ledger);
    Settled {
        ledger,
        reported,
        to_send,
        overflow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::expected;

    const CATALOG: &str = r#"
[jobs.hourly]
owner = "data"
deadline = "20m"
[jobs.hourly.schedule]
expression = "rate(1 hour)"
start = 2026-01-01T00:00:00Z
"#;

    fn at(t: &str) -> DateTime<Utc> {
        t.parse().unwrap()
    }

    fn catalog() -> Catalog {
        Catalog::parse(CATALOG, "c.toml").unwrap()
    }

    const GRACE: Duration = Duration::from_secs(600);

    fn record(key: &str, status: Status) -> ExecutionRecord {
        let job = key.split('#').next().unwrap_or(key);
        let mut r = crate::accounting::run_of(key, job, at("2026-06-01T00:00:00Z"));
        r.status = status;
        r
    }

    /// A check at `now` after `previous`, with `records` (key → status) in the store.
    fn check(previous: &Ledger, now: &str, records: &[(&str, Status)]) -> Settled {
        check_of(&catalog(), previous, now, records, &[])
    }

    /// [`check`] of `catalog`, with the jobs `paused` paused.
    fn check_of(
        catalog: &Catalog,
        previous: &Ledger,
        now: &str,
        records: &[(&str, Status)],
        paused: &[&str],
    ) -> Settled {
        let now = at(now);
        let since = since(Some(previous), None, now);
        let from = span(catalog, GRACE, since);
        let paused: BTreeSet<&str> = paused.iter().copied().collect();
        let watched = watch(previous, catalog, &paused, since, now);
        let expected: Vec<Expected> = expected(catalog, from, now, GRACE, |_, _| false)
            .into_iter()
            .filter(|e| is_watched(&watched, e))
            .collect();
        let store: HashMap<String, ExecutionRecord> = records
            .iter()
            .map(|(k, s)| (k.to_string(), record(k, *s)))
            .collect();
        let earlier = previous
            .findings
            .iter()
            .map(|f| (f.key.clone(), store.get(&f.key).cloned()))
            .collect();
        settle(previous, since, now, &expected, &store, &earlier, watched)
    }

    fn keys(findings: &[Finding]) -> Vec<(Kind, &str)> {
        findings.iter().map(|f| (f.kind, f.key.as_str())).collect()
    }

    #[test]
    fn a_first_check_expects_nothing_before_it() {
        let first = check(&Ledger::default(), "2026-06-01T05:07:00Z", &[]);
        assert!(first.reported.is_empty(), "{first:#?}");
        assert!(first.ledger.findings.is_empty());
        assert_eq!(first.ledger.checked_to, Some(at("2026-06-01T05:07:00Z")));
        assert_eq!(first.ledger.checks, 1);
    }

    #[test]
    fn a_missed_firing_is_reported_once_and_listed_for_a_day() {
        let start = check(&Ledger::default(), "2026-06-01T00:11:00Z", &[]).ledger;
        // 01:00 has no record; it is missed from 01:10 (no window, 10 min grace).
        let before = check(&start, "2026-06-01T01:09:00Z", &[]);
        assert!(before.reported.is_empty());
        let found = check(&before.ledger, "2026-06-01T01:12:00Z", &[]);
        assert_eq!(
            keys(&found.reported),
            [(Kind::Missed, "hourly#2026-06-01T01:00:00Z")]
        );
        let again = check(&found.ledger, "2026-06-01T01:17:00Z", &[]);
        assert!(again.reported.is_empty(), "reported once: {again:#?}");
        assert_eq!(keys(&again.ledger.findings), keys(&found.reported));
        assert_eq!(
            again.ledger.findings[0].found_at,
            at("2026-06-01T01:12:00Z")
        );
        // Every later hour is missed too; a day later, 01:00 is no longer listed.
        let mut ledger = again.ledger;
        let mut t = at("2026-06-01T01:17:00Z");
        let mut reported = 1;
        while t < at("2026-06-02T01:20:00Z") {
            t += chrono::Duration::minutes(5);
            let next = check(&ledger, &t.to_rfc3339(), &[]);
            reported += next.reported.len();
            ledger = next.ledger;
        }
        assert_eq!(reported, 25, "each hour's firing once");
        assert!(
            !ledger
                .findings
                .iter()
                .any(|f| f.key == "hourly#2026-06-01T01:00:00Z"),
            "{:#?}",
            ledger.findings
        );
    }

    #[test]
    fn a_late_run_is_reported_once_and_no_longer_listed_once_done() {
        let key = "hourly#2026-06-01T01:00:00Z";
        let start = check(&Ledger::default(), "2026-06-01T00:55:00Z", &[]).ledger;
        let running = check(&start, "2026-06-01T01:19:00Z", &[(key, Status::Running)]);
        assert!(running.reported.is_empty());
        let late = check(
            &running.ledger,
            "2026-06-01T01:24:00Z",
            &[(key, Status::Running)],
        );
        assert_eq!(keys(&late.reported), [(Kind::Late, key)]);
        let still = check(
            &late.ledger,
            "2026-06-01T01:29:00Z",
            &[(key, Status::Retrying)],
        );
        assert!(still.reported.is_empty());
        assert_eq!(still.ledger.findings[0].status, Some(Status::Retrying));
        // Long after the check's span has moved on, the run ends DONE: no longer listed.
        let mut ledger = still.ledger;
        let mut t = at("2026-06-01T01:29:00Z");
        let records = |t: DateTime<Utc>| {
            let status = if t < at("2026-06-01T09:00:00Z") {
                Status::Running
            } else {
                Status::Done
            };
            vec![
                (key, status),
                ("hourly#2026-06-01T02:00:00Z", Status::Done),
                ("hourly#2026-06-01T03:00:00Z", Status::Done),
                ("hourly#2026-06-01T04:00:00Z", Status::Done),
                ("hourly#2026-06-01T05:00:00Z", Status::Done),
                ("hourly#2026-06-01T06:00:00Z", Status::Done),
                ("hourly#2026-06-01T07:00:00Z", Status::Done),
                ("hourly#2026-06-01T08:00:00Z", Status::Done),
                ("hourly#2026-06-01T09:00:00Z", Status::Done),
            ]
        };
        while t < at("2026-06-01T09:30:00Z") {
            t += chrono::Duration::minutes(5);
            let next = check(&ledger, &t.to_rfc3339(), &records(t));
            assert!(next.reported.is_empty(), "{t}: {next:#?}");
            if t < at("2026-06-01T09:00:00Z") {
                assert_eq!(keys(&next.ledger.findings), [(Kind::Late, key)], "{t}");
            }
            ledger = next.ledger;
        }
        assert!(ledger.findings.is_empty(), "{:#?}", ledger.findings);
    }

    #[test]
    fn a_missed_firing_whose_run_comes_after_all_is_listed_late_until_done() {
        let key = "hourly#2026-06-01T01:00:00Z";
        let start = check(&Ledger::default(), "2026-06-01T00:55:00Z", &[]).ledger;
        let missed = check(&start, "2026-06-01T01:15:00Z", &[]);
        assert_eq!(keys(&missed.reported), [(Kind::Missed, key)]);
        // The scheduler's retry delivers it at last; it runs past its deadline.
        let late = check(
            &missed.ledger,
            "2026-06-01T01:25:00Z",
            &[(key, Status::Running)],
        );
        assert_eq!(keys(&late.ledger.findings), [(Kind::Late, key)]);
        assert!(
            late.reported.is_empty(),
            "the same firing, reported once: {late:#?}"
        );
    }

    #[test]
    fn a_long_outage_keeps_the_ledger_within_one_item_and_reports_each_firing_once() {
        // 300 hourly jobs with long names, and no run for 15 hours, checked every 5
        // minutes: the ledger once grew past DynamoDB's 400 KB and its write failed.
        let text: String = (0..300)
            .map(|i| {
                format!(
                    "[jobs.nightly-invoice-export-for-customer-segment-{i:03}]\n\
                     owner = \"billing\"\ndeadline = \"20m\"\n\
                     [jobs.nightly-invoice-export-for-customer-segment-{i:03}.schedule]\n\
                     expression = \"rate(1 hour)\"\nstart = 2026-01-01T00:00:00Z\n"
                )
            })
            .collect();
        let catalog = Catalog::parse(&text, "c.toml").unwrap();
        let mut ledger = Ledger::default();
        let mut reported: BTreeMap<String, usize> = BTreeMap::new();
        let mut overflowed = Overflow::default();
        let start = at("2026-06-01T00:00:00Z");
        for step in 0..=(15 * 12) {
            let now = start + chrono::Duration::minutes(5 * step);
            let settled = check_of(&catalog, &ledger, &now.to_rfc3339(), &[], &[]);
            for f in &settled.reported {
                *reported.entry(f.key.clone()).or_default() += 1;
            }
            overflowed.dropped += settled.overflow.dropped;
            overflowed.forgotten += settled.overflow.forgotten;
            // The item as written (its report still unsent): its key, `checks` and
            // `ledger` (names and values).
            let item = ".schedkit/accountant".len() + "execution_key".len() + 20 + 6;
            let bytes = text_len(&settled.ledger) + item;
            assert!(bytes <= 400 * 1024, "{bytes} bytes at {now}");
            // Sent, as the stage's check says once its metrics are out.
            ledger = sent(&settled.ledger);
        }
        assert!(
            reported.values().all(|n| *n == 1),
            "a firing reported twice"
        );
        assert_eq!(reported.len(), 300 * 15, "every hour's firing of every job");
        assert!(overflowed.forgotten > 0, "the outage did reach the bound");
        assert_eq!(ledger.forgotten, overflowed.forgotten);
        assert_eq!(ledger.findings.len(), MOST_FINDINGS, "the newest listed");
    }

    /// A check that wrote its ledger and stopped before it said its report was sent (or
    /// lost that write's answer): the next check sends that report again, with its own;
    /// once one says it sent them, none sends them again. (Before, the next check found
    /// the firing judged, and it was never reported.)
    #[test]
    fn a_report_not_said_sent_is_sent_again_by_the_next_check() {
        let start = check(&Ledger::default(), "2026-06-01T00:11:00Z", &[]).ledger;
        let found = check(&sent(&start), "2026-06-01T01:12:00Z", &[]);
        let keys = |fs: &[Finding]| fs.iter().map(|f| f.key.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&found.reported), ["hourly#2026-06-01T01:00:00Z"]);
        assert_eq!(keys(&found.ledger.unsent), keys(&found.reported));
        // Its writer stopped before `sent`: the next check carries it.
        let next = check(&found.ledger, "2026-06-01T01:17:00Z", &[]);
        assert!(next.reported.is_empty(), "nothing new turned missed");
        assert_eq!(keys(&next.ledger.unsent), ["hourly#2026-06-01T01:00:00Z"]);
        // Said sent: the one after carries nothing.
        let after = check(&sent(&next.ledger), "2026-06-01T01:22:00Z", &[]);
        assert!(after.ledger.unsent.is_empty(), "{:?}", after.ledger.unsent);
    }

    /// A catalog of `n` hourly jobs whose names have 64 characters (the longest).
    fn long_named_hourly(n: usize) -> Catalog {
        let text: String = (0..n)
            .map(|i| {
                let name = format!("{i:05}-{}", "x".repeat(58));
                format!(
                    "[jobs.{name}]\nowner = \"o\"\ndeadline = \"20m\"\n[jobs.{name}.schedule]\nexpression = \"rate(1 hour)\"\nstart = 2026-01-01T00:00:00Z\n"
                )
            })
            .collect();
        Catalog::parse(&text, "c.toml").unwrap()
    }

    /// The catalog's bound on scheduled jobs and chains keeps the ledger's entry for each
    /// (names of 64 characters, every one paused: the longest entries) within three
    /// quarters of its item, the rest for its findings (trimmed to fit, the oldest first);
    /// past it, `catalog check` warns. (4,500 such jobs filled the item, and every check's
    /// write was refused.)
    #[test]
    fn the_most_scheduled_names_leave_the_ledger_room() {
        let most = crate::catalog::model::SCHEDULED_MAX;
        let catalog = long_named_hourly(most);
        let names: BTreeSet<&str> = catalog.jobs.keys().map(String::as_str).collect();
        assert!(names.iter().all(|n| n.len() == 64));
        let now = at("2026-06-01T00:00:00Z");
        let ledger = Ledger {
            checks: u64::MAX,
            checked_to: Some(now),
            watched: watch(&Ledger::default(), &catalog, &names, now, now),
            ..Ledger::default()
        };
        let bytes = text_len(&ledger);
        assert!(
            bytes <= MOST_LEDGER_BYTES * 3 / 4,
            "{bytes} bytes for {most} names"
        );
        assert_eq!(catalog.warnings.len(), 0, "{:?}", catalog.warnings.first());
        let past = long_named_hourly(most + 1);
        assert_eq!(past.warnings.len(), 1, "{:?}", past.warnings.first());
        assert!(past.warnings[0].to_string().contains("more than 2000"));
    }

    /// Every job of a full catalog missed its firing at once (workers down for a quarter
    /// of an hour): the check sends every one of them, though the ledger, its watched
    /// names taking three quarters of its item, cannot keep them all to be sent again
    /// (it reported only what it could keep, and let the reported keys and the findings go
    /// to make room for them).
    #[test]
    fn a_check_sends_every_report_the_ledger_cannot_keep() {
        let catalog = long_named_hourly(crate::catalog::model::SCHEDULED_MAX);
        let start = check_of(
            &catalog,
            &Ledger::default(),
            "2026-06-01T00:05:00Z",
            &[],
            &[],
        );
        let found = check_of(
            &catalog,
            &sent(&start.ledger),
            "2026-06-01T01:15:00Z",
            &[],
            &[],
        );
        assert_eq!(
            found.reported.len(),
            catalog.jobs.len(),
            "every job's 01:00"
        );
        assert_eq!(found.to_send.len(), found.reported.len());
        assert!(found.ledger.unsent.len() < found.to_send.len(), "trimmed");
        assert!(found.overflow.unkept > 0);
        assert!(
            !found.ledger.findings.is_empty(),
            "findings kept before unsent"
        );
        assert!(text_len(&found.ledger) <= MOST_LEDGER_BYTES);
    }

    fn text_len(ledger: &Ledger) -> usize {
        text(ledger).len()
    }

    #[test]
    fn a_check_never_reaches_back_further_than_its_longest_span() {
        let old = Ledger {
            checked_to: Some(at("2026-05-01T00:00:00Z")),
            ..Ledger::default()
        };
        let now = at("2026-06-01T00:00:00Z");
        assert_eq!(
            since(Some(&old), None, now),
            now - chrono::Duration::from_std(LONGEST_SPAN).unwrap()
        );
        assert_eq!(since(None, None, now), now);
        let asked = at("2026-05-31T12:00:00Z");
        assert_eq!(since(Some(&old), Some(asked), now), asked);
    }

    #[test]
    fn the_longest_wait_is_the_longest_deadline_or_window_and_grace() {
        assert_eq!(
            longest_wait(&catalog(), GRACE),
            Duration::from_secs(20 * 60)
        );
        assert_eq!(
            longest_wait(&catalog(), Duration::from_secs(3600)),
            Duration::from_secs(3600)
        );
    }

    const EVERY_5: &str = r#"
[jobs.hourly]
owner = "data"
deadline = "20m"
[jobs.hourly.schedule]
expression = "rate(1 hour)"
start = 2026-01-01T00:00:00Z

[jobs.often]
owner = "data"
deadline = "2m"
timeout_seconds = 60
[jobs.often.schedule]
expression = "rate(5 minutes)"
start = 2026-01-01T00:00:00Z
"#;

    #[test]
    fn a_schedule_added_or_resumed_is_expected_from_then_not_before() {
        let both = Catalog::parse(EVERY_5, "c.toml").unwrap();
        let start = check(&Ledger::default(), "2026-06-01T10:01:00Z", &[]).ledger;
        // `often` is deployed at 10:03: its 09:55 and 10:00 firings never were.
        let added = check_of(&both, &start, "2026-06-01T10:06:00Z", &[], &[]);
        assert!(added.reported.is_empty(), "{added:#?}");
        // Paused from before 10:11, resumed before 10:26: the firings while paused are not
        // missed; the first after the resume is.
        let records: Vec<(String, Status)> = ["10:05", "10:10"]
            .iter()
            .map(|t| (format!("often#2026-06-01T{t}:00Z"), Status::Done))
            .collect();
        let records: Vec<(&str, Status)> = records.iter().map(|(k, s)| (k.as_str(), *s)).collect();
        let paused = check_of(
            &both,
            &added.ledger,
            "2026-06-01T10:11:00Z",
            &records,
            &["often"],
        );
        let paused = check_of(
            &both,
            &paused.ledger,
            "2026-06-01T10:21:00Z",
            &records,
            &["often"],
        );
        assert!(paused.reported.is_empty(), "{paused:#?}");
        let resumed = check_of(&both, &paused.ledger, "2026-06-01T10:26:00Z", &records, &[]);
        assert!(
            resumed.reported.is_empty(),
            "nothing while paused: {resumed:#?}"
        );
        let later = check_of(
            &both,
            &resumed.ledger,
            "2026-06-01T10:46:00Z",
            &records,
            &[],
        );
        let keys: Vec<&str> = later.reported.iter().map(|f| f.key.as_str()).collect();
        assert!(keys.contains(&"often#2026-06-01T10:30:00Z"), "{keys:?}");
        assert!(
            !keys.iter().any(|k| *k < "often#2026-06-01T10:26"),
            "{keys:?}"
        );
    }

    #[test]
    fn a_schedule_changed_between_two_checks_is_expected_from_the_check_that_sees_it() {
        // Hourly on the hour, then (synced at some time between two checks) on the half
        // hour: its 10:30 firing before the change never was; that check reports nothing
        // of it, the next reports what the new schedule missed after.
        let before = catalog();
        let after = Catalog::parse(
            &CATALOG.replace("2026-01-01T00:00:00Z", "2026-01-01T00:30:00Z"),
            "c.toml",
        )
        .unwrap();
        let start = check(&Ledger::default(), "2026-06-01T10:01:00Z", &[]).ledger;
        let held = check_of(&before, &start, "2026-06-01T10:06:00Z", &[], &[]).ledger;
        let changed = check_of(&after, &held, "2026-06-01T10:46:00Z", &[], &[]);
        assert!(changed.reported.is_empty(), "{changed:#?}");
        let next = check_of(&after, &changed.ledger, "2026-06-01T11:46:00Z", &[], &[]);
        assert_eq!(
            keys(&next.reported),
            [(Kind::Missed, "hourly#2026-06-01T11:30:00Z")]
        );
    }

    #[test]
    fn a_missed_firing_whose_run_comes_before_its_deadline_is_not_reported_again_late() {
        let key = "hourly#2026-06-01T01:00:00Z";
        let start = check(&Ledger::default(), "2026-06-01T00:55:00Z", &[]).ledger;
        let missed = check(&start, "2026-06-01T01:11:00Z", &[]);
        assert_eq!(keys(&missed.reported), [(Kind::Missed, key)]);
        let running = check(
            &missed.ledger,
            "2026-06-01T01:16:00Z",
            &[(key, Status::Running)],
        );
        assert!(running.reported.is_empty());
        let late = check(
            &running.ledger,
            "2026-06-01T01:21:00Z",
            &[(key, Status::Running)],
        );
        assert!(late.reported.is_empty(), "reported once already: {late:#?}");
        assert_eq!(keys(&late.ledger.findings), [(Kind::Late, key)]);
    }
}
