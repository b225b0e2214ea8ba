//! Flow control in the catalog: `[limits.<name>]` that jobs share (runs at once, starts per
//! window), and a job's own concurrency, per key of its payload. Checked here; enforced by
//! the worker with permits held like leases.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::Duration;

use super::error::CatalogError;
use super::model::{JobSpec, LimitSpec, Settings};
use super::rules::{name_rule, valid_name};
use crate::envelope::PRIORITIES;
use crate::flow::{FlowControl, FlowLimit, MOST_AT_ONCE, Rate, Scope};
use crate::key::KeyTemplate;

/// A limit jobs share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// The name under `[limits.<name>]`.
    pub name: String,
    /// Runs of all its jobs at once.
    pub concurrency: Option<NonZeroU32>,
    /// Starts per window.
    pub rate: Option<Rate>,
    /// Whose turn a freed permit is: keys of this template take turns.
    pub fair: Option<KeyTemplate>,
}

/// What limits a job's runs: the shared limits it names, its own concurrency, and how long
/// a run may wait for them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobLimits {
    /// The `[limits.<name>]` it names, in the order written.
    pub shared: Vec<String>,
    /// Its own concurrency (per key when keyed).
    pub concurrency: Option<KeyedConcurrency>,
    /// A run that waited longer is dead-lettered as `limit-wait`.
    pub max_wait: Option<Duration>,
    /// Its runs' priority for a freed permit.
    pub priority: i32,
}

impl JobLimits {
    /// Whether anything limits the job.
    pub fn any(&self) -> bool {
        !self.shared.is_empty() || self.concurrency.is_some()
    }

    /// What the worker enforces: the shared limits it names (from the catalog's
    /// `shared`, all of them valid by now) and its own concurrency.
    pub(super) fn flow(&self, shared: &BTreeMap<String, Limit>) -> FlowControl {
        let mut limits: Vec<FlowLimit> = self
            .shared
            .iter()
            .filter_map(|name| shared.get(name))
            .map(|l| FlowLimit {
                scope: Scope::Shared(l.name.clone()),
                concurrency: l.concurrency,
                rate: l.rate,
                key: None,
                fair: l.fair.clone(),
            })
            .collect();
        if let Some(own) = &self.concurrency {
            limits.insert(
                0,
                FlowLimit {
                    scope: Scope::Job,
                    concurrency: Some(own.limit),
                    rate: None,
                    key: own.key.clone(),
                    fair: None,
                },
            );
        }
        FlowControl {
            limits,
            max_wait: self.max_wait,
            priority: self.priority,
        }
    }
}

/// A job's own concurrency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedConcurrency {
    /// Runs at once (per key).
    pub limit: NonZeroU32,
    /// Runs whose payloads render the same key count together; None: all runs of the job.
    pub key: Option<KeyTemplate>,
}

/// One problem found in the limits, said of `job` (None: of a `[limits]` table).
pub(super) type Report<'a> = dyn FnMut(Option<&str>, String, String) + 'a;

/// The `[limits.<name>]` tables, checked; a bad one is reported and left out.
pub(super) fn check_limits(
    specs: &BTreeMap<String, LimitSpec>,
    report: &mut Report<'_>,
) -> BTreeMap<String, Limit> {
    let mut out = BTreeMap::new();
    for (name, spec) in specs {
        let field = |f: &str| format!("limits.{name}{f}");
        let mut ok = true;
        if !valid_name(name) {
            report(None, field(""), name_rule(name));
            ok = false;
        }
        if spec.concurrency.is_none() && spec.rate.is_none() {
            report(
                None,
                field(""),
                "gives neither `concurrency` nor `rate`: it would limit nothing".into(),
            );
            ok = false;
        }
        let concurrency = match spec.concurrency {
            Some(0) => {
                report(
                    None,
                    field(".concurrency"),
                    "must be at least 1: a limit of 0 would never let a run start".into(),
                );
                ok = false;
                None
            }
            Some(n) if n > MOST_AT_ONCE => {
                report(None, field(".concurrency"), too_many(n));
                ok = false;
                None
            }
            n => n.and_then(NonZeroU32::new),
        };
        let rate = match spec.rate.as_deref().map(str::parse::<Rate>) {
            Some(Err(e)) => {
                report(None, field(".rate"), e);
                ok = false;
                None
            }
            Some(Ok(r)) => Some(r),
            None => None,
        };
        let fair = match spec.fair.as_deref().map(str::parse::<KeyTemplate>) {
            Some(Err(e)) => {
                report(None, field(".fair"), e.to_string());
                ok = false;
                None
            }
            Some(Ok(t)) => Some(t),
            None => None,
        };
        if fair.is_some() && concurrency.is_none() {
            report(
                None,
                field(".fair"),
                "shares permits between keys, and this limit has no `concurrency` to share: give it one, or leave `fair` out".into(),
            );
            ok = false;
        }
        if ok {
            let limit = Limit {
                name: name.clone(),
                concurrency,
                rate,
                fair,
            };
            out.insert(name.clone(), limit);
        }
    }
    out
}

/// A job's limits, checked against the catalog's `[limits]` (all of them, `known`, valid
/// or not) and its payload.
pub(super) fn check_job_limits(
    job: &str,
    spec: &JobSpec,
    known: &BTreeMap<String, LimitSpec>,
    settings: &Settings,
    report: &mut Report<'_>,
) -> JobLimits {
    let mut fail = |field: &str, message: String| report(Some(job), field.to_string(), message);
    let mut shared = Vec::new();
    for name in &spec.limits {
        if !known.contains_key(name) {
            let names: Vec<&str> = known.keys().map(String::as_str).collect();
            let listed = if names.is_empty() {
                "it has none".to_string()
            } else {
                format!("its limits: {}", names.join(", "))
            };
            fail(
                "limits",
                format!("`{name}` is not a `[limits.<name>]` of the catalog ({listed})"),
            );
        } else if shared.contains(name) {
            fail("limits", format!("`{name}` is named twice"));
        } else {
            shared.push(name.clone());
        }
    }
    let paced: Vec<&str> = shared
        .iter()
        .filter(|name| known.get(*name).is_some_and(|l| l.rate.is_some()))
        .map(String::as_str)
        .collect();
    if paced.len() > 1 {
        fail(
            "limits",
            format!(
                "names more than one limit with a rate ({}): a run the second holds back would have spent a start of the first; name one of them, or give this job's calls a limit of their own",
                paced.join(", ")
            ),
        );
    }
    let concurrency = spec.concurrency.as_ref().and_then(|c| {
        let limit = NonZeroU32::new(c.limit).filter(|n| n.get() <= MOST_AT_ONCE);
        if c.limit == 0 {
            fail(
                "concurrency.limit",
                "must be at least 1: a limit of 0 would never let a run start".into(),
            );
        } else if limit.is_none() {
            fail("concurrency.limit", too_many(c.limit));
        }
        let key = match c.key.as_deref().map(str::parse::<KeyTemplate>) {
            Some(Err(e)) => {
                fail("concurrency.key", e.to_string());
                return None;
            }
            Some(Ok(t)) => Some(t),
            None => None,
        };
        if let (Some(t), Some(payload)) = (&key, &spec.payload) {
            for field in t.fields().filter(|f| !payload.contains_key(*f)) {
                fail(
                    "concurrency.key",
                    format!(
                        "`{t}` reads payload field `{field}`, which the job's payload does not have (its fields: {})",
                        payload.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                );
            }
        }
        Some(KeyedConcurrency { limit: limit?, key })
    });
    let max_wait = max_wait(spec, settings, &mut fail);
    if max_wait.is_some() && shared.is_empty() && concurrency.is_none() {
        fail(
            "max_wait_seconds",
            "the job has no limits to wait for (`limits` or `concurrency`)".into(),
        );
    }
    JobLimits {
        shared,
        concurrency,
        max_wait,
        priority: priority(spec, &mut fail),
    }
}

/// The job's runs' priority, within [`PRIORITIES`]: for a freed permit of its limits, and
/// the queue its runs wait in (any above 0: the urgent queue, [`crate::queue::urgent`]),
/// so an unlimited job may have one too.
fn priority(spec: &JobSpec, fail: &mut dyn FnMut(&str, String)) -> i32 {
    let priority = spec.priority.unwrap_or(0);
    if !PRIORITIES.contains(&priority) {
        fail(
            "priority",
            format!(
                "{priority} is outside {}..={}: a priority is a level a waiting run rises through in {} s each",
                PRIORITIES.start(),
                PRIORITIES.end(),
                crate::store::AGING.as_secs()
            ),
        );
    }
    priority.clamp(*PRIORITIES.start(), *PRIORITIES.end())
}

/// How long a run of the job may wait for its limits: at least a second, at most what the
/// queue keeps a message.
fn max_wait(
    spec: &JobSpec,
    settings: &Settings,
    fail: &mut dyn FnMut(&str, String),
) -> Option<Duration> {
    let kept = Duration::from_secs(u64::from(settings.queue_retention_days) * 86_400);
    match spec.max_wait_seconds {
        Some(0) => {
            fail(
                "max_wait_seconds",
                "must be at least 1 (omit it to wait as long as the queue keeps the message)"
                    .into(),
            );
            None
        }
        Some(s) if Duration::from_secs(u64::from(s)) > kept => {
            fail(
                "max_wait_seconds",
                format!(
                    "{s} s is longer than the queue keeps a message ({} days, `settings.queue_retention_days`): the message would expire while it waits",
                    settings.queue_retention_days
                ),
            );
            None
        }
        s => s.map(|s| Duration::from_secs(u64::from(s))),
    }
}

/// Why a concurrency of `n` is refused.
fn too_many(n: u32) -> String {
    format!(
        "{n} is more than a limit can hold ({MOST_AT_ONCE}: its holders are kept in one DynamoDB item); for more runs at once, cap the queue's `MaximumConcurrency` instead"
    )
}

/// A problem of a limit or a job's limits, as the catalog reports it.
pub(super) fn finding(
    file: &str,
    job: Option<&str>,
    field: String,
    message: String,
) -> CatalogError {
    CatalogError {
        file: file.to_string(),
        job: job.map(str::to_string),
        chain: None,
        field: Some(field),
        message,
    }
}
