//! What `schedkit status` and `schedkit jobs` say of the catalog's limits: each gate's
//! permits in use (from its item: one consistent read a gate), a rate's next start, and the
//! runs held back in the last five minutes (the `Throttled` metric: a waiting run is a
//! delayed message on the jobs queue, not an item, so it is counted where it is counted).

use aws_sdk_cloudwatch::types::{Dimension, Statistic};
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::OpsError;
use super::stage::Stage;
use crate::aws::{AwsResultExt, SdkConfig};
use crate::catalog::{Catalog, Job};
use crate::flow::Gate;
use crate::store::{KEY_ATTRIBUTE, gate_item};

/// One limit as the stage holds it now.
#[derive(Debug, Clone, Serialize)]
pub struct LimitUse {
    /// A shared limit's name, or `<job>/concurrency` for a job's own.
    pub limit: String,
    /// The jobs that enter it.
    pub jobs: Vec<String>,
    /// Runs at once it allows (per key, when `per_key` is given).
    pub concurrency: Option<u32>,
    /// Its rate, as the catalog writes it.
    pub rate: Option<String>,
    /// The key template that gives each key its own gate; its gates are not listed (they
    /// are one item a key, found only by their keys).
    pub per_key: Option<String>,
    /// Runs holding a permit whose lease has not run out by their entry's hint; None for a
    /// limit per key.
    pub in_use: Option<usize>,
    /// Entries of runs whose hint has passed: ended without giving the permit back, or
    /// running on under heartbeats; the next taker looks at their records.
    pub lapsed: Option<usize>,
    /// The rate's earliest next start, RFC 3339.
    pub next_start: Option<String>,
    /// Runs held back by it in the last five minutes (`Throttled`); None without data.
    pub held_back_5m: Option<f64>,
}

/// The limits of `catalog` as the stage holds them.
pub async fn gather(
    sdk: &SdkConfig,
    target: &Stage,
    catalog: &Catalog,
) -> Result<Vec<LimitUse>, OpsError> {
    let ddb = aws_sdk_dynamodb::Client::new(sdk);
    let mut out = Vec::new();
    for (limit, jobs, gate) in limits_of(catalog) {
        let mut row = LimitUse {
            limit: limit.clone(),
            jobs,
            concurrency: gate.as_ref().and_then(|g| g.concurrency),
            rate: rate_of(catalog, &limit),
            per_key: per_key_of(catalog, &limit),
            in_use: None,
            lapsed: None,
            next_start: None,
            held_back_5m: held_back(sdk, &target.stage, &limit).await,
        };
        if let Some(gate) = gate {
            let item = ddb
                .get_item()
                .table_name(&target.table)
                .key(
                    KEY_ATTRIBUTE,
                    aws_sdk_dynamodb::types::AttributeValue::S(gate.item.clone()),
                )
                .consistent_read(true)
                .send()
                .await
                .aws(format!("reading limit `{limit}`"))?
                .item
                .map(|i| gate_item(&i))
                .unwrap_or_default();
            let now = Utc::now().timestamp_millis();
            let live = item.holders.values().filter(|h| h.until_ms >= now).count();
            row.in_use = gate.concurrency.map(|_| live);
            row.lapsed = gate.concurrency.map(|_| item.holders.len() - live);
            row.next_start = item
                .next_start_ms
                .filter(|t| *t > now)
                .and_then(DateTime::<Utc>::from_timestamp_millis)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        }
        out.push(row);
    }
    Ok(out)
}

/// Every limit of the catalog, with the jobs that enter it and, unless it is per key, its
/// one gate.
pub fn limits_of(catalog: &Catalog) -> Vec<(String, Vec<String>, Option<Gate>)> {
    let mut out: Vec<(String, Vec<String>, Option<Gate>)> = Vec::new();
    for job in catalog.jobs.values() {
        for (limit, gate) in gates_of(job) {
            match out.iter_mut().find(|(l, _, _)| *l == limit) {
                Some((_, jobs, _)) => jobs.push(job.name.clone()),
                None => out.push((limit, vec![job.name.clone()], gate)),
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The limits a job enters: each one's name and its gate (None for a gate per key).
pub fn gates_of(job: &Job) -> Vec<(String, Option<Gate>)> {
    job.policy
        .flow
        .limits
        .iter()
        .map(|l| {
            let gate = l
                .key
                .is_none()
                .then(|| l.gate(&job.name, None).ok())
                .flatten();
            let name = match &l.scope {
                crate::flow::Scope::Shared(n) => n.clone(),
                crate::flow::Scope::Job => format!("{}/concurrency", job.name),
            };
            (name, gate)
        })
        .collect()
}

fn rate_of(catalog: &Catalog, limit: &str) -> Option<String> {
    catalog.limits.get(limit)?.rate.map(|r| r.to_string())
}

fn per_key_of(catalog: &Catalog, limit: &str) -> Option<String> {
    let job = limit.strip_suffix("/concurrency")?;
    let own = catalog.job(job)?.limits.concurrency.as_ref()?;
    own.key.as_ref().map(|k| k.to_string())
}

/// The `Throttled` count of `limit` over the last five minutes; None without data.
async fn held_back(sdk: &SdkConfig, stage: &str, limit: &str) -> Option<f64> {
    let now = Utc::now();
    let cw = aws_sdk_cloudwatch::Client::new(sdk);
    let dimension = |name: &str, value: &str| Dimension::builder().name(name).value(value).build();
    let out = cw
        .get_metric_statistics()
        .namespace(crate::telemetry::metrics::NAMESPACE)
        .metric_name("Throttled")
        .dimensions(dimension("Stage", stage))
        .dimensions(dimension("Limit", limit))
        .start_time(aws_sdk_cloudwatch::primitives::DateTime::from_secs(
            (now - chrono::Duration::minutes(5)).timestamp(),
        ))
        .end_time(aws_sdk_cloudwatch::primitives::DateTime::from_secs(
            now.timestamp(),
        ))
        .period(300)
        .statistics(Statistic::Sum)
        .send()
        .await
        .ok()?;
    out.datapoints?
        .iter()
        .filter_map(|d| d.sum)
        .reduce(|a, b| a + b)
}

/// A job's limits in a line: `partner-api (3 at once), export/concurrency (1 per {account})`.
pub fn describe(job: &Job) -> String {
    let parts: Vec<String> = job
        .policy
        .flow
        .limits
        .iter()
        .map(|l| {
            let name = match &l.scope {
                crate::flow::Scope::Shared(n) => n.clone(),
                crate::flow::Scope::Job => "own".to_string(),
            };
            let mut what = Vec::new();
            if let Some(n) = l.concurrency {
                what.push(match &l.key {
                    Some(k) => format!("{n} per {k}"),
                    None => format!("{n} at once"),
                });
            }
            if let Some(r) = l.rate {
                what.push(r.to_string());
            }
            format!("{name} ({})", what.join(", "))
        })
        .collect();
    match (parts.is_empty(), job.policy.flow.max_wait) {
        (true, _) => String::new(),
        (false, Some(w)) => format!("{}; waits at most {} s", parts.join(", "), w.as_secs()),
        (false, None) => parts.join(", "),
    }
}
