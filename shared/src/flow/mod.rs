//! Flow control: how many runs may hold a limit at once, and how often they may start.
//!
//! A job's [`FlowControl`] comes from the catalog (`[limits.<name>]` it names, its own
//! `concurrency`); the worker takes a permit of each of the run's [`Gate`]s after the claim
//! decides the run will run, and gives them back once its outcome is written. A permit is
//! an entry in the gate's item in the executions table, in schedkit's own key space, that
//! names the run and its claim: it lasts as long as the run's lease does (a worker that
//! dies with it leaves an entry the next taker drops once the holder's record shows the
//! lease ran out), so no permit outlives its run by more than the lease and the clock-skew
//! bound. A rate is kept in the same item as the earliest time the next start may take
//! place (one start every `window / starts`), so that no window of that length ever holds
//! more starts than the rate allows, whichever window is looked at.

mod message_group;
mod rate;

use std::num::NonZeroU32;
use std::time::Duration;

use serde_json::{Map, Value};

pub use message_group::sqs_group;
pub use rate::Rate;

use crate::key::{KeyError, KeyTemplate};
use crate::store::INTERNAL_PREFIX;

/// What limits a job's runs.
#[derive(Debug, Clone, Default)]
pub struct FlowControl {
    /// The limits a run must enter, in the order they are taken.
    pub limits: Vec<FlowLimit>,
    /// A run that waited longer is dead-lettered as `limit-wait`; None: it waits as long
    /// as the queue keeps its message.
    pub max_wait: Option<Duration>,
    /// Its runs' priority for a freed permit (a run's envelope may raise or lower it).
    pub priority: i32,
}

impl FlowControl {
    /// Whether anything limits the job.
    pub fn any(&self) -> bool {
        !self.limits.is_empty()
    }

    /// The gates a run of `job` with `payload` must pass, in the order they are taken:
    /// those that only count runs first, those with a rate last, so that a run refused by
    /// a full gate has not spent a start of a rate.
    pub fn gates(
        &self,
        job: &str,
        payload: Option<&Map<String, Value>>,
    ) -> Result<Vec<Gate>, KeyError> {
        let mut gates = Vec::with_capacity(self.limits.len());
        for limit in &self.limits {
            gates.push(limit.gate(job, payload)?);
        }
        gates.sort_by_key(|g| g.spacing.is_some());
        Ok(gates)
    }
}

/// One limit of a job: a `[limits.<name>]` it shares, or its own concurrency.
#[derive(Debug, Clone)]
pub struct FlowLimit {
    /// Whose limit it is.
    pub scope: Scope,
    /// Runs holding it at once (per key, when `key` is given).
    pub concurrency: Option<NonZeroU32>,
    /// Starts per window.
    pub rate: Option<Rate>,
    /// Runs whose payloads render the same text share a gate (the job's own concurrency).
    pub key: Option<KeyTemplate>,
    /// Runs whose payloads render the same text are one fair share of the gate (a shared
    /// limit's `fair`); None: each job is one.
    pub fair: Option<KeyTemplate>,
}

/// Whose limit it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `[limits.<name>]`, shared by every job that names it.
    Shared(String),
    /// The job's own `concurrency`.
    Job,
}

/// The most runs a gate holds at once: its holders live in one DynamoDB item (at most
/// 400 KB), each under its run's key (up to 1 KB). For more runs at once, cap the jobs
/// queue's event source (`MaximumConcurrency`) instead.
pub const MOST_AT_ONCE: u32 = 300;

/// Longest key text kept as it is in a gate's item key; longer ones are hashed.
const LONGEST_KEY_TEXT: usize = 256;

impl FlowLimit {
    /// The gate of this limit for a run of `job` with `payload`.
    pub fn gate(&self, job: &str, payload: Option<&Map<String, Value>>) -> Result<Gate, KeyError> {
        let (name, item) = match &self.scope {
            Scope::Shared(name) => (name.clone(), format!("{INTERNAL_PREFIX}limit/{name}")),
            // Named apart from any shared limit (whose names have no `/`).
            Scope::Job => (
                format!("{job}/concurrency"),
                format!("{INTERNAL_PREFIX}concurrency/{job}"),
            ),
        };
        let item = match &self.key {
            None => item,
            Some(template) => {
                let text = template.render(payload)?;
                let text = if text.len() > LONGEST_KEY_TEXT {
                    format!("#{}", crate::hash::stable_hash([text.as_bytes()]))
                } else {
                    text
                };
                format!("{item}/{text}")
            }
        };
        let share = match &self.fair {
            Some(template) => template.render(payload)?,
            None => job.to_string(),
        };
        Ok(Gate {
            limit: name,
            item,
            concurrency: self.concurrency.map(NonZeroU32::get),
            spacing: self.rate.map(|r| r.spacing()),
            share,
            fair: self.fair.is_some(),
        })
    }
}

/// The item of the limit whose gate is `item`: the gate's own for a limit without a key,
/// else the gate's item without its key (`.schedkit/concurrency/export` of
/// `.schedkit/concurrency/export/acme`). The names of limits and jobs hold no `/`, so the
/// key begins after the third.
pub fn limit_item(item: &str) -> &str {
    match item.match_indices('/').nth(2) {
        Some((at, _)) => &item[..at],
        None => item,
    }
}

/// One gate a run passes: a limit, or one key's share of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    /// The limit's name (a shared limit's, or the job's own): the metrics' `Limit`.
    pub limit: String,
    /// The key of the gate's item in the executions table.
    pub item: String,
    /// Runs holding it at once.
    pub concurrency: Option<u32>,
    /// The least time between two starts (a rate).
    pub spacing: Option<Duration>,
    /// The run's fair share of the gate: runs of the share holding fewest permits are
    /// handed the next one ([`crate::store::next_waiter`]).
    pub share: String,
    /// Whether the limit names a `fair` key: a run of another key may wait in the queue
    /// behind one key's backlog, and a worker whose runs of one key crowd the gate sends
    /// the next ones away to look for it (`batch::crowded`). A gate without one keeps its
    /// runs waiting in hand.
    pub fair: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payload(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn a_keyed_concurrency_gives_each_key_its_own_gate_in_schedkits_key_space() {
        let own = FlowLimit {
            scope: Scope::Job,
            concurrency: NonZeroU32::new(2),
            rate: None,
            key: Some("{tenant}".parse().unwrap()),
            fair: None,
        };
        let a = own
            .gate("export", Some(&payload(json!({"tenant": "a"}))))
            .unwrap();
        let b = own
            .gate("export", Some(&payload(json!({"tenant": "b"}))))
            .unwrap();
        assert_eq!(a.item, ".schedkit/concurrency/export/a");
        assert_eq!(limit_item(&a.item), ".schedkit/concurrency/export");
        assert_eq!(limit_item(".schedkit/limit/api/a/b"), ".schedkit/limit/api");
        assert_eq!(limit_item(".schedkit/limit/api"), ".schedkit/limit/api");
        assert_ne!(a.item, b.item);
        assert!(crate::store::is_internal(&a.item));
        assert_eq!(
            (a.limit.as_str(), a.concurrency),
            ("export/concurrency", Some(2))
        );
        let missing = own.gate("export", Some(&payload(json!({"other": 1}))));
        assert!(missing.unwrap_err().to_string().contains("tenant"));
        let long = "x".repeat(1000);
        let hashed = own
            .gate("export", Some(&payload(json!({"tenant": long}))))
            .unwrap();
        assert!(hashed.item.len() < 80, "{}", hashed.item);
    }

    #[test]
    fn gates_with_a_rate_are_taken_last() {
        let shared = |name: &str, rate: Option<&str>| FlowLimit {
            scope: Scope::Shared(name.into()),
            concurrency: NonZeroU32::new(3),
            rate: rate.map(|r| r.parse().unwrap()),
            key: None,
            fair: None,
        };
        let flow = FlowControl {
            limits: vec![shared("paced", Some("30/minute")), shared("plain", None)],
            max_wait: None,
            priority: 0,
        };
        let gates = flow.gates("j", None).unwrap();
        let names: Vec<_> = gates.iter().map(|g| g.limit.as_str()).collect();
        assert_eq!(names, ["plain", "paced"]);
        assert_eq!(gates[1].spacing, Some(Duration::from_secs(2)));
        assert_eq!(gates[0].item, ".schedkit/limit/plain");
    }
}
