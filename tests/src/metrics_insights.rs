//! CloudWatch Metrics Insights, evaluated here: LocalStack stores an alarm on a query but
//! never evaluates it (nor answers `GetMetricData` with a query, nor
//! `DescribeAlarmContributors`), so a test runs the alarm's own query, as the template
//! deploys it, over the EMF lines the worker printed, and asks which series (jobs) breach.
//!
//! The subset schedkit's alarms and dashboard write: `SELECT SUM|MAX|MIN|AVG|COUNT(metric)
//! FROM SCHEMA(namespace, key, ...) [WHERE key = 'value' [AND ...]] [GROUP BY key, ...]
//! [ORDER BY FUNC() ASC|DESC] [LIMIT n]`. As CloudWatch reads it: a metric is in the
//! schema when its dimension keys are exactly the schema's; each EMF line is one datapoint
//! of each metric it defines, for each of its dimension sets.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

/// How a series' datapoints in the period are aggregated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// Their sum.
    Sum,
    /// The largest.
    Max,
    /// The smallest.
    Min,
    /// Their mean.
    Avg,
    /// How many.
    Count,
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The aggregation.
    pub function: Function,
    /// The metric's name.
    pub metric: String,
    /// The namespace of the schema.
    pub namespace: String,
    /// The schema's dimension keys.
    pub keys: BTreeSet<String>,
    /// `key = 'value'` conditions, all of which hold.
    pub filters: Vec<(String, String)>,
    /// The keys each series is a group of.
    pub group_by: Vec<String>,
    /// `Some(true)` for descending order by the aggregate.
    pub descending: Option<bool>,
    /// At most this many series.
    pub limit: Option<usize>,
}

/// One series a query returns: its group's dimension values and its aggregate.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The grouped keys' values (`Job` → `nightly`).
    pub group: BTreeMap<String, String>,
    /// The aggregate of its datapoints.
    pub value: f64,
}

impl FromStr for Query {
    type Err = String;

    fn from_str(text: &str) -> Result<Query, String> {
        let err = |what: &str| format!("{what} in `{text}`");
        let rest = text.trim();
        let rest = strip_word(rest, "SELECT").ok_or_else(|| err("no SELECT"))?;
        let open = rest.find('(').ok_or_else(|| err("no function"))?;
        let function = match rest[..open].trim().to_ascii_uppercase().as_str() {
            "SUM" => Function::Sum,
            "MAX" => Function::Max,
            "MIN" => Function::Min,
            "AVG" => Function::Avg,
            "COUNT" => Function::Count,
            f => return Err(err(&format!("unknown function {f}"))),
        };
        let close = rest.find(')').ok_or_else(|| err("an unclosed function"))?;
        let metric = rest[open + 1..close].trim().to_string();
        let rest = strip_word(&rest[close + 1..], "FROM").ok_or_else(|| err("no FROM"))?;
        let rest = strip_word(rest, "SCHEMA").ok_or_else(|| err("no SCHEMA"))?;
        let rest = rest
            .trim_start()
            .strip_prefix('(')
            .ok_or_else(|| err("no SCHEMA list"))?;
        let close = rest.find(')').ok_or_else(|| err("an unclosed SCHEMA"))?;
        let mut schema = rest[..close].split(',').map(|p| unquote(p.trim()));
        let namespace = schema.next().ok_or_else(|| err("no namespace"))?;
        let keys: BTreeSet<String> = schema.collect();
        let mut rest = rest[close + 1..].trim();
        let mut query = Query {
            function,
            metric,
            namespace,
            keys,
            filters: Vec::new(),
            group_by: Vec::new(),
            descending: None,
            limit: None,
        };
        if let Some(r) = strip_word(rest, "WHERE") {
            let end = clause_end(r);
            for condition in split_and(&r[..end]) {
                let (k, v) = condition
                    .split_once('=')
                    .ok_or_else(|| err("a condition that is not key = 'value'"))?;
                query.filters.push((unquote(k.trim()), unquote(v.trim())));
            }
            rest = r[end..].trim();
        }
        if let Some(r) = strip_word(rest, "GROUP BY") {
            let end = clause_end(r);
            query.group_by = r[..end].split(',').map(|k| unquote(k.trim())).collect();
            rest = r[end..].trim();
        }
        if let Some(r) = strip_word(rest, "ORDER BY") {
            let end = clause_end(r);
            query.descending = Some(r[..end].to_ascii_uppercase().contains("DESC"));
            rest = r[end..].trim();
        }
        if let Some(r) = strip_word(rest, "LIMIT") {
            query.limit = Some(
                r.trim()
                    .parse()
                    .map_err(|_| err("a LIMIT that is not a number"))?,
            );
            rest = "";
        }
        if !rest.is_empty() {
            return Err(err(&format!("`{rest}` left over")));
        }
        Ok(query)
    }
}

fn strip_word<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let t = text.trim_start();
    (t.len() >= word.len() && t[..word.len()].eq_ignore_ascii_case(word)).then(|| &t[word.len()..])
}

/// Where the clause starting `text` ends: at the next keyword.
fn clause_end(text: &str) -> usize {
    let upper = text.to_ascii_uppercase();
    [" GROUP BY ", " ORDER BY ", " LIMIT "]
        .iter()
        .filter_map(|k| upper.find(k))
        .min()
        .unwrap_or(text.len())
}

fn split_and(text: &str) -> Vec<&str> {
    let upper = text.to_ascii_uppercase();
    let mut parts = Vec::new();
    let mut start = 0;
    while let Some(i) = upper[start..].find(" AND ") {
        parts.push(&text[start..start + i]);
        start += i + 5;
    }
    parts.push(&text[start..]);
    parts
}

fn unquote(text: &str) -> String {
    text.trim_matches(|c| c == '\'' || c == '"').to_string()
}

impl Query {
    /// The series the query returns over the datapoints of `lines` (EMF documents) whose
    /// timestamps fall in `[from_ms, to_ms)`: one period.
    pub fn evaluate(&self, lines: &[serde_json::Value], from_ms: i64, to_ms: i64) -> Vec<Series> {
        let mut groups: BTreeMap<Vec<(String, String)>, Vec<f64>> = BTreeMap::new();
        for line in lines {
            let Some(aws) = line.get("_aws") else {
                continue;
            };
            let at = aws
                .get("Timestamp")
                .and_then(|t| t.as_i64())
                .unwrap_or(i64::MIN);
            if at < from_ms || at >= to_ms {
                continue;
            }
            for directive in aws["CloudWatchMetrics"].as_array().into_iter().flatten() {
                if directive["Namespace"].as_str() != Some(self.namespace.as_str()) {
                    continue;
                }
                let defines = directive["Metrics"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|m| m["Name"].as_str() == Some(self.metric.as_str()));
                let Some(value) = line.get(&self.metric).and_then(|v| v.as_f64()) else {
                    continue;
                };
                if !defines {
                    continue;
                }
                for set in directive["Dimensions"].as_array().into_iter().flatten() {
                    let keys: BTreeSet<String> = set
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|k| k.as_str().map(str::to_owned))
                        .collect();
                    if keys != self.keys {
                        continue;
                    }
                    let dim = |k: &str| line.get(k).and_then(|v| v.as_str()).unwrap_or_default();
                    if !self.filters.iter().all(|(k, v)| dim(k) == v) {
                        continue;
                    }
                    let group = self
                        .group_by
                        .iter()
                        .map(|k| (k.clone(), dim(k).to_string()))
                        .collect();
                    groups.entry(group).or_default().push(value);
                }
            }
        }
        let mut series: Vec<Series> = groups
            .into_iter()
            .map(|(group, values)| Series {
                group: group.into_iter().collect(),
                value: self.aggregate(&values),
            })
            .collect();
        if let Some(desc) = self.descending {
            series.sort_by(|a, b| {
                let o = a.value.total_cmp(&b.value);
                if desc { o.reverse() } else { o }
            });
        }
        if let Some(n) = self.limit {
            series.truncate(n);
        }
        series
    }

    fn aggregate(&self, values: &[f64]) -> f64 {
        match self.function {
            Function::Sum => values.iter().sum(),
            Function::Max => values.iter().copied().fold(f64::MIN, f64::max),
            Function::Min => values.iter().copied().fold(f64::MAX, f64::min),
            Function::Avg => values.iter().sum::<f64>() / values.len().max(1) as f64,
            Function::Count => values.len() as f64,
        }
    }
}

/// An alarm of a template on a query: the query (its `${Stage}` filled in), its threshold
/// and comparison, as the template writes them.
#[derive(Debug, Clone)]
pub struct QueryAlarm {
    /// The query.
    pub query: Query,
    /// The threshold.
    pub threshold: f64,
    /// `GreaterThanOrEqualToThreshold`, `GreaterThanThreshold`, ...
    pub comparison: String,
}

impl QueryAlarm {
    /// The alarm `resource` of the template text, for stage `stage`.
    pub fn from_template(
        template: &str,
        resource: &str,
        stage: &str,
    ) -> Result<QueryAlarm, String> {
        let start = template
            .find(&format!("\n  {resource}:\n"))
            .ok_or_else(|| format!("the template has no resource {resource}"))?;
        let block: String = template[start + 1..]
            .lines()
            .enumerate()
            .take_while(|(i, l)| *i == 0 || l.is_empty() || l.starts_with("    "))
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        let field = |name: &str| {
            block
                .lines()
                .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
                .map(str::to_owned)
                .ok_or_else(|| format!("{resource} has no {name}"))
        };
        let expression = field("Expression")?;
        let expression = expression.trim_start_matches("!Sub ");
        let expression: String = serde_json::from_str(expression).map_err(|e| e.to_string())?;
        Ok(QueryAlarm {
            query: expression.replace("${Stage}", stage).parse()?,
            threshold: field("Threshold")?
                .parse()
                .map_err(|_| "a threshold".to_string())?,
            comparison: field("ComparisonOperator")?,
        })
    }

    /// The series in ALARM over one period of `lines`: the alarm's contributors.
    pub fn contributors(
        &self,
        lines: &[serde_json::Value],
        from_ms: i64,
        to_ms: i64,
    ) -> Vec<Series> {
        self.query
            .evaluate(lines, from_ms, to_ms)
            .into_iter()
            .filter(|s| match self.comparison.as_str() {
                "GreaterThanOrEqualToThreshold" => s.value >= self.threshold,
                "GreaterThanThreshold" => s.value > self.threshold,
                "LessThanThreshold" => s.value < self.threshold,
                "LessThanOrEqualToThreshold" => s.value <= self.threshold,
                _ => false,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emf(stage: &str, job: &str, metric: &str, value: f64, at: i64) -> serde_json::Value {
        serde_json::json!({
            "_aws": {"Timestamp": at, "CloudWatchMetrics": [{"Namespace": "schedkit",
                "Dimensions": [["Stage", "Job"]], "Metrics": [{"Name": metric, "Unit": "Count"}]}]},
            "Stage": stage, "Job": job, metric: value,
        })
    }

    #[test]
    fn a_grouped_query_sums_each_jobs_datapoints_in_the_period_and_stage() {
        let q: Query = schedkit::iac::stage_alarms::insights_query("Failed", "prod")
            .parse()
            .unwrap();
        assert_eq!(
            q.keys,
            BTreeSet::from(["Job".to_string(), "Stage".to_string()])
        );
        assert_eq!(q.filters, [("Stage".to_string(), "prod".to_string())]);
        let lines = [
            emf("prod", "a", "Failed", 1.0, 100),
            emf("prod", "a", "Failed", 1.0, 200),
            emf("prod", "b", "Failed", 1.0, 150),
            emf("dev", "c", "Failed", 1.0, 150),
            emf("prod", "d", "Succeeded", 1.0, 150),
            emf("prod", "e", "Failed", 1.0, 5_000),
        ];
        let series = q.evaluate(&lines, 0, 1_000);
        let got: Vec<(String, f64)> = series
            .iter()
            .map(|s| (s.group["Job"].clone(), s.value))
            .collect();
        assert_eq!(got, [("a".to_string(), 2.0), ("b".to_string(), 1.0)]);
    }

    #[test]
    fn a_limit_and_a_metric_of_other_dimensions() {
        let q: Query =
            "SELECT MAX(Duration) FROM SCHEMA(schedkit, Job, Stage) WHERE Stage = 'p' GROUP BY Job ORDER BY MAX() DESC LIMIT 1"
                .parse()
                .unwrap();
        let mut limited = emf("p", "slow", "Duration", 90.0, 1);
        limited["_aws"]["CloudWatchMetrics"][0]["Dimensions"] =
            serde_json::json!([["Stage", "Limit"]]);
        let lines = [
            emf("p", "fast", "Duration", 5.0, 1),
            emf("p", "slow", "Duration", 50.0, 1),
            limited,
        ];
        let s = q.evaluate(&lines, 0, 10);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].group["Job"].as_str(), s[0].value), ("slow", 50.0));
        assert!("SELECT SUM(x) FROM y".parse::<Query>().is_err());
    }
}
