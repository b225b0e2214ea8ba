//! The stage's dashboard: widgets over Metrics Insights queries grouped by job (or by
//! limit), each showing the jobs that matter most (the most failures, the slowest), so its
//! body is the same for four jobs as for a thousand. A dashboard holds at most 500 widgets
//! and a body of 1 MB; this one has eight widgets and a few kilobytes, whatever the catalog.
//! Metrics Insights has no percentiles: durations and lags are shown as maxima.

use std::fmt::Write;

use super::resources::q;

/// Series a widget shows at most: the top of its ordering.
pub const TOP: u32 = 20;

/// A widget: its place, title and the query of one metric of the stage by `by`.
struct Widget {
    title: &'static str,
    function: &'static str,
    metric: &'static str,
    /// The dimension the series are grouped by (`Job` or `Limit`).
    by: &'static str,
}

const WIDGETS: &[Widget] = &[
    Widget {
        title: "Failed runs: the 20 jobs with most",
        function: "SUM",
        metric: "Failed",
        by: "Job",
    },
    Widget {
        title: "Succeeded runs: the 20 jobs with most",
        function: "SUM",
        metric: "Succeeded",
        by: "Job",
    },
    Widget {
        title: "Retries: the 20 jobs with most",
        function: "SUM",
        metric: "Retried",
        by: "Job",
    },
    Widget {
        title: "Longest run (ms): the 20 slowest jobs",
        function: "MAX",
        metric: "Duration",
        by: "Job",
    },
    Widget {
        title: "Largest schedule lag (ms): the 20 latest jobs",
        function: "MAX",
        metric: "ScheduleLag",
        by: "Job",
    },
    Widget {
        title: "Runs held back, by limit",
        function: "SUM",
        metric: "Throttled",
        by: "Limit",
    },
    Widget {
        title: "Longest wait for limits (ms): the 20 jobs that waited most",
        function: "MAX",
        metric: "LimitWait",
        by: "Job",
    },
];

/// A widget's query for the stage `stage` (the template passes `${Stage}`).
fn query(w: &Widget, stage: &str) -> String {
    format!(
        "SELECT {f}({m}) FROM SCHEMA(schedkit, {by}, Stage) WHERE Stage = '{stage}' GROUP BY {by} ORDER BY {f}() DESC LIMIT {TOP}",
        f = w.function,
        m = w.metric,
        by = w.by
    )
}

/// The dashboard's body (a JSON document with `${...}` for `!Sub`).
pub(super) fn body() -> String {
    let metric = |x: u32, y: u32, title: &str, metrics: String, stat: &str| {
        format!(
            r#"{{"type":"metric","x":{x},"y":{y},"width":12,"height":6,"properties":{{"title":"{title}","region":"${{AWS::Region}}","stat":"{stat}","period":300,"metrics":[{metrics}]}}}}"#
        )
    };
    let queue = r#"["AWS/SQS","ApproximateNumberOfMessagesVisible","QueueName","${JobsQueue.QueueName}"],["AWS/SQS","ApproximateNumberOfMessagesVisible","QueueName","${JobsDeadLetterQueue.QueueName}"],["AWS/SQS","ApproximateAgeOfOldestMessage","QueueName","${JobsQueue.QueueName}",{"yAxis":"right"}]"#;
    let mut widgets = vec![metric(
        0,
        0,
        "Queue depth, DLQ depth, oldest message (s)",
        queue.to_string(),
        "Maximum",
    )];
    for (i, w) in WIDGETS.iter().enumerate() {
        let i = i as u32 + 1;
        let expression = serde_json::to_string(&query(w, "${Stage}")).expect("a string");
        let metrics = format!(r#"[{{"expression":{expression},"id":"q{i}","label":""}}]"#);
        let stat = if w.function == "MAX" {
            "Maximum"
        } else {
            "Sum"
        };
        widgets.push(metric((i % 2) * 12, (i / 2) * 6, w.title, metrics, stat));
    }
    format!(r#"{{"widgets":[{}]}}"#, widgets.join(","))
}

/// Writes the dashboard resource.
pub(super) fn write(r: &mut String) {
    writeln!(r, "  Dashboard:").unwrap();
    writeln!(r, "    Type: AWS::CloudWatch::Dashboard").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(r, "      DashboardName: !Sub schedkit-${{Stage}}").unwrap();
    writeln!(r, "      DashboardBody: !Sub {}", q(&body())).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_widget_is_a_query_of_the_stages_own_metrics_or_the_stages_queues() {
        let body: serde_json::Value = serde_json::from_str(&body()).unwrap();
        let widgets = body["widgets"].as_array().unwrap();
        assert_eq!(widgets.len(), 1 + WIDGETS.len());
        for w in &widgets[1..] {
            let expression = w["properties"]["metrics"][0][0]["expression"]
                .as_str()
                .unwrap();
            assert!(
                expression.contains("FROM SCHEMA(schedkit, ")
                    && expression.contains("WHERE Stage = '${Stage}'")
                    && expression.ends_with(&format!("LIMIT {TOP}")),
                "{expression}"
            );
        }
        assert!(body.to_string().contains("GROUP BY Limit"));
    }
}
