//! `cron(...)`, `rate(...)` and `at(...)`: EventBridge Scheduler's three expression forms.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::NaiveDateTime;

use super::cron::Cron;
use super::error::ExpressionError;

/// A parsed schedule expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expression {
    /// Fires on wall-clock times of the schedule's zone.
    Cron(Cron),
    /// Fires every `interval` from the schedule's start (a day is 24 hours, whatever DST does).
    Rate(Duration),
    /// Fires once, at this wall-clock time of the schedule's zone.
    At(NaiveDateTime),
}

/// An expression with the text it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleExpression {
    source: String,
    /// What the expression is, for evaluating it.
    pub kind: Expression,
}

impl fmt::Display for ScheduleExpression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl ScheduleExpression {
    /// The text it was parsed from, as the Scheduler API takes it.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// True for `at(...)`: it fires once, and start and end dates do not apply.
    pub(crate) fn is_one_time(&self) -> bool {
        matches!(self.kind, Expression::At(_))
    }
}

impl FromStr for ScheduleExpression {
    type Err = ExpressionError;

    fn from_str(text: &str) -> Result<Self, ExpressionError> {
        let err = |pos: usize, msg: &str| ExpressionError::new(text, None, pos, msg.to_string());
        let open = text
            .find('(')
            .ok_or_else(|| err(0, "expected cron(...), rate(...) or at(...)"))?;
        let inner = text[open + 1..]
            .strip_suffix(')')
            .ok_or_else(|| err(text.len(), "expected `)` at the end"))?;
        let kind = match &text[..open] {
            "cron" => Expression::Cron(Cron::parse(inner, text, open + 1)?),
            "rate" => Expression::Rate(rate(inner, text, open + 1)?),
            "at" => Expression::At(
                NaiveDateTime::parse_from_str(inner, "%Y-%m-%dT%H:%M:%S").map_err(|_| {
                    err(
                        open + 1,
                        &format!("`{inner}` is not a time, expected yyyy-mm-ddThh:mm:ss"),
                    )
                })?,
            ),
            other => {
                return Err(err(
                    0,
                    &format!("unknown expression type `{other}`, expected cron, rate or at"),
                ));
            }
        };
        Ok(ScheduleExpression {
            source: text.to_string(),
            kind,
        })
    }
}

fn rate(inner: &str, text: &str, offset: usize) -> Result<Duration, ExpressionError> {
    let err = |pos: usize, msg: String| ExpressionError::new(text, None, offset + pos, msg);
    let parts: Vec<&str> = inner.split(' ').collect();
    let [value, unit] = parts[..] else {
        return Err(err(
            0,
            "expected `rate(value unit)`, e.g. rate(5 minutes)".into(),
        ));
    };
    let n: u64 = value
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| err(0, format!("`{value}` is not a positive whole number")))?;
    let unit_at = value.len() + 1;
    let (seconds, singular) = match unit {
        "minute" | "minutes" => (60, "minute"),
        "hour" | "hours" => (3600, "hour"),
        "day" | "days" => (86_400, "day"),
        _ => {
            return Err(err(
                unit_at,
                format!("unit `{unit}` is not minute(s), hour(s) or day(s)"),
            ));
        }
    };
    match (n == 1, unit == singular) {
        (true, false) => {
            return Err(err(
                unit_at,
                format!("with 1 the unit is singular: `{singular}`"),
            ));
        }
        (false, true) => {
            return Err(err(
                unit_at,
                format!("with {n} the unit is plural: `{singular}s`"),
            ));
        }
        _ => {}
    }
    n.checked_mul(seconds)
        .map(Duration::from_secs)
        .ok_or_else(|| err(0, format!("`{value}` {unit} is too long an interval")))
}
