//! What `schedkit status` and `schedkit jobs` say of the catalog's limits: each gate's
//! permits in use (from its item: one consistent read a gate), a rate's next start, and the
//! runs held back in the last five minutes (the `Throttled` metric), and the gate's line:
//! who waits, for how long, of which fair share, and who gets the next permit. A run
//! beyond the line (more than it keeps) is a delayed message on the jobs queue, not an
//! item, so it is counted by the metric alone.

use aws_sdk_cloudwatch::types::{Dimension, Statistic};
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::OpsError;
use super::stage::Stage;
use crate::aws::{AwsResultExt, SdkConfig};
use crate::catalog::{Catalog, Job};
use crate::flow::Gate;
use crate::store::{GateItem, KEY_ATTRIBUTE, gate_item, next_waiter};

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
    /// Its line: the runs parked for a permit; None for a rate or a limit per key.
    pub line: Option<LineUse>,
}

/// A gate's line of waiting runs, as `status` and the page show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LineUse {
    /// Runs parked in it.
    pub waiting: usize,
    /// How long the longest waiting has waited, whole seconds.
    pub longest_wait_s: u64,
    /// The run the next permit goes to, and why it comes first.
    pub next: Option<NextUp>,
    /// Each fair share that holds or waits: shares with waiters first, most waiting first.
    pub shares: Vec<ShareUse>,
}

/// The waiter the next permit is handed on to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NextUp {
    /// Its execution key.
    pub key: String,
    /// Its fair share (the job's name for a limit without `fair`).
    pub share: String,
    /// Its priority, as sent (aging lifts it in the line, not here).
    pub priority: i32,
    /// How long it has waited, whole seconds.
    pub waited_s: u64,
}

/// One fair share of a gate: what it holds and what of it waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShareUse {
    /// The share: the rendered `fair` key, or the job's name.
    pub share: String,
    /// Permits its runs hold now (reservations for woken runs included).
    pub holding: usize,
    /// Its runs in the line.
    pub waiting: usize,
    /// How long its longest waiting run has waited, whole seconds.
    pub longest_wait_s: u64,
    /// The highest priority among its waiting runs (0 when none waits).
    pub top_priority: i32,
}

/// The line of `item` at `now_ms`, with the next run picked by the rule the wakers use.
pub fn line_of(item: &GateItem, now_ms: i64) -> LineUse {
    let secs = |since_ms: i64| ((now_ms - since_ms).max(0) / 1000) as u64;
    let mut shares: Vec<ShareUse> = Vec::new();
    let mut share = |name: &str| -> usize {
        match shares.iter().position(|s| s.share == name) {
            Some(i) => i,
            None => {
                shares.push(ShareUse {
                    share: name.to_string(),
                    holding: 0,
                    waiting: 0,
                    longest_wait_s: 0,
                    top_priority: i32::MIN,
                });
                shares.len() - 1
            }
        }
    };
    let mut at = Vec::new();
    for holder in item.holders.values() {
        at.push((share(&holder.share), None));
    }
    for waiter in item.waiters.values() {
        at.push((share(&waiter.share), Some(waiter)));
    }
    for (i, waiter) in at {
        let s = &mut shares[i];
        match waiter {
            None => s.holding += 1,
            Some(w) => {
                s.waiting += 1;
                s.longest_wait_s = s.longest_wait_s.max(secs(w.since_ms));
                s.top_priority = s.top_priority.max(w.priority);
            }
        }
    }
    for s in &mut shares {
        if s.waiting == 0 {
            s.top_priority = 0;
        }
    }
    shares.sort_by(|a, b| (b.waiting, &a.share).cmp(&(a.waiting, &b.share)));
    LineUse {
        waiting: item.waiters.len(),
        longest_wait_s: shares.iter().map(|s| s.longest_wait_s).max().unwrap_or(0),
        next: next_waiter(item, now_ms).map(|(key, w)| NextUp {
            key: key.clone(),
            share: w.share.clone(),
            priority: w.priority,
            waited_s: secs(w.since_ms),
        }),
        shares,
    }
}

/// A share in words: `acme: 4 held, 60 waiting (longest 12 s, priority 5)`.
pub fn describe_share(share: &ShareUse) -> String {
    let mut out = format!("{}: {} held", share.share, share.holding);
    if share.waiting > 0 {
        let priority = match share.top_priority {
            0 => String::new(),
            p => format!(", priority {p}"),
        };
        out += &format!(
            ", {} waiting (longest {} s{priority})",
            share.waiting, share.longest_wait_s
        );
    }
    out
}

/// A line in words, for a table's cell: `3 (longest 12 s); next: run-7 of acme`.
pub fn describe_line(line: &LineUse) -> String {
    let Some(next) = &line.next else {
        return "none".to_string();
    };
    let priority = match next.priority {
        0 => String::new(),
        p => format!(", priority {p}"),
    };
    format!(
        "{} (longest {} s); next: {} of {}{priority}",
        line.waiting, line.longest_wait_s, next.key, next.share
    )
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
            line: None,
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
            row.line = gate.concurrency.map(|_| line_of(&item, now));
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
            // The gate's item and bounds do not depend on the fair share a run's payload
            // renders: without a payload, a limit with a `fair` key rendered no gate, and
            // `status` and the page showed it with nothing in use and no line.
            let whole = crate::flow::FlowLimit {
                fair: None,
                ..l.clone()
            };
            let gate = l
                .key
                .is_none()
                .then(|| whole.gate(&job.name, None).ok())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Holder, Waiter};

    fn holder(share: &str) -> Holder {
        Holder {
            owner: "w:1".into(),
            until_ms: 100_000,
            share: share.into(),
            then: None,
        }
    }

    fn waiter(share: &str, since_ms: i64, priority: i32) -> Waiter {
        Waiter {
            since_ms,
            priority,
            share: share.into(),
            handle: "h".into(),
            until_ms: since_ms + 30_000,
        }
    }

    /// A limit shared fairly by a payload's field has its one gate all the same (the
    /// browser test of the overview found `status` and the page showing such a limit with
    /// nothing in use and no line: its gate was rendered from no payload, and failed).
    #[test]
    fn a_fair_limit_has_its_one_gate_to_read() {
        let catalog = Catalog::parse(
            "[limits.partner]\nconcurrency = 2\nfair = \"{tenant}\"\n\n\
             [jobs.report]\nowner = \"t\"\npayload = { tenant = \"a\" }\nlimits = [\"partner\"]\n",
            "c.toml",
        )
        .unwrap();
        let limits = limits_of(&catalog);
        let (name, jobs, gate) = &limits[0];
        assert_eq!(
            (name.as_str(), jobs.as_slice()),
            ("partner", &["report".to_string()][..])
        );
        let gate = gate.as_ref().expect("its gate");
        assert_eq!(
            (gate.item.as_str(), gate.concurrency),
            (".schedkit/limit/partner", Some(2))
        );
    }

    #[test]
    fn a_line_shows_each_share_and_the_run_the_next_permit_goes_to() {
        let mut item = GateItem {
            counted: true,
            has_waiters: true,
            ..GateItem::default()
        };
        for (i, key) in ["a-1", "a-2", "a-3", "a-4"].iter().enumerate() {
            let h = holder("acme");
            item.holders.insert(key.to_string(), h);
            item.waiters
                .insert(format!("a-{}", i + 5), waiter("acme", 1_000 + i as i64, 0));
        }
        item.waiters.insert("b-1".into(), waiter("bolt", 40_000, 0));
        let line = line_of(&item, 60_000);
        assert_eq!((line.waiting, line.longest_wait_s), (5, 59));
        let next = line.next.clone().unwrap();
        assert_eq!(
            (next.key.as_str(), next.share.as_str(), next.waited_s),
            ("b-1", "bolt", 20),
            "the quiet share holds nothing: its run comes first"
        );
        let shares: Vec<(&str, usize, usize, u64)> = line
            .shares
            .iter()
            .map(|s| (s.share.as_str(), s.holding, s.waiting, s.longest_wait_s))
            .collect();
        assert_eq!(shares, [("acme", 4, 4, 59), ("bolt", 0, 1, 20)]);
        assert_eq!(describe_line(&line), "5 (longest 59 s); next: b-1 of bolt");
        // Aged 5 levels after 59 s, acme's oldest waits at priority 5: urgent is above it.
        item.waiters
            .insert("urgent".into(), waiter("acme", 59_000, 10));
        let line = line_of(&item, 60_000);
        assert_eq!(
            describe_line(&line),
            "6 (longest 59 s); next: urgent of acme, priority 10"
        );
        assert_eq!(line.shares[0].top_priority, 10);
        let words: Vec<String> = line.shares.iter().map(describe_share).collect();
        assert_eq!(
            words,
            [
                "acme: 4 held, 5 waiting (longest 59 s, priority 10)",
                "bolt: 0 held, 1 waiting (longest 20 s)"
            ]
        );
        assert_eq!(describe_line(&line_of(&GateItem::default(), 0)), "none");
    }
}
