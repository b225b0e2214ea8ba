//! The pieces every generated resource is written with: logical ids, quoted strings, and
//! a job's (or chain's) alarm on one of its metrics. A leaf: the template's parts and the
//! chains' resources both build on it.

use std::fmt::Write;

/// `long-report` → `LongReport`: a CloudFormation logical id.
pub fn logical_id(name: &str) -> String {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// `text` as a YAML (JSON) string, quoted and escaped.
pub(super) fn q(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// Where an alarm notifies: the stage's own topic, or the one it was given.
pub(super) const NOTIFY: &str =
    "[!If [CreateTopic, !Ref NotificationTopic, !Ref NotificationTarget]]";

/// An alarm on one of a job's metrics (its Sum over 5 minutes at least 1), of this stage.
pub(super) struct JobAlarm<'a> {
    /// The logical id.
    pub(super) resource: String,
    /// `schedkit-<stage>-<job>-<suffix>`.
    pub(super) suffix: &'a str,
    pub(super) description: &'a str,
    pub(super) metric: &'a str,
    /// Whether it notifies by itself (or only feeds a composite alarm).
    pub(super) notify: bool,
}

impl JobAlarm<'_> {
    /// Writes it for the job (or chain) `name`, whose metrics carry it as `Job`.
    pub(super) fn write(&self, r: &mut String, name: &str) {
        writeln!(r, "  {}:", self.resource).unwrap();
        writeln!(r, "    Type: AWS::CloudWatch::Alarm").unwrap();
        writeln!(r, "    Properties:").unwrap();
        writeln!(
            r,
            "      AlarmName: !Sub schedkit-${{Stage}}-{}-{}",
            name, self.suffix
        )
        .unwrap();
        writeln!(r, "      AlarmDescription: {}", q(self.description)).unwrap();
        writeln!(
            r,
            "      Namespace: schedkit\n      MetricName: {}",
            self.metric
        )
        .unwrap();
        writeln!(
            r,
            "      Dimensions: [{{ Name: Stage, Value: !Ref Stage }}, {{ Name: Job, Value: {} }}]",
            q(name)
        )
        .unwrap();
        writeln!(
            r,
            "      Statistic: Sum\n      Period: 300\n      EvaluationPeriods: 1\n      Threshold: 1"
        )
        .unwrap();
        writeln!(
            r,
            "      ComparisonOperator: GreaterThanOrEqualToThreshold\n      TreatMissingData: notBreaching"
        )
        .unwrap();
        if self.notify {
            writeln!(r, "      AlarmActions: {NOTIFY}").unwrap();
        }
        writeln!(r).unwrap();
    }
}
