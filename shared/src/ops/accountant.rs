//! The accountant's reading of a stage: the firings the catalog expected in a window
//! ([`crate::accounting::expected`]), each looked up among its job's (or chain's) records
//! through the `by-job` index (one query per name, paged by scheduled time: nothing scans
//! the table), and what is missed or late at `now`.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::OpsError;
use super::executions::{Filter, Records};
use crate::accounting::{self, Expected, Verdict};
use crate::catalog::Catalog;
use crate::store::{ExecutionRecord, PauseRecord, Status};

/// How long after its flexible window a firing may still arrive before it is missed: the
/// scheduler's delivery retries and a queue that is behind.
pub const GRACE: Duration = Duration::from_secs(10 * 60);

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
    records: &Records,
    catalog: &Catalog,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
    paused: &[PauseRecord],
) -> Result<Account, OpsError> {
    let paused_since = |name: &str| {
        paused
            .iter()
            .find(|p| p.job == name)
            .and_then(|p| DateTime::parse_from_rfc3339(&p.at).ok())
            .map(|at| at.with_timezone(&Utc))
    };
    let expected = accounting::expected(catalog, from, to, GRACE, paused_since);
    let mut names: Vec<&str> = expected.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut account = Account {
        expected: expected.len(),
        ..Account::default()
    };
    let mut found: HashMap<String, ExecutionRecord> = HashMap::new();
    for name in names {
        let mut page = None;
        loop {
            let filter = Filter {
                job: Some(name.to_string()),
                since: Some(from),
                until: Some(to),
                limit: 200,
                page: page.take(),
                ..Filter::default()
            };
            let (batch, next) = records.list(&filter).await?;
            account.queries += 1;
            found.extend(batch.into_iter().map(|r| (r.execution_key.clone(), r)));
            match next {
                Some(token) => page = Some(token),
                None => break,
            }
        }
    }
    for e in &expected {
        let record = found.get(&e.key);
        match accounting::verdict(e, record, now) {
            Verdict::Missed => account.missed.push(unaccounted(e, None)),
            Verdict::Late => account.late.push(unaccounted(e, record.map(|r| r.status))),
            Verdict::NotYet | Verdict::Running | Verdict::Accounted => {}
        }
    }
    Ok(account)
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
