//! Schedule expressions with EventBridge Scheduler's semantics: parse, validate, and list
//! the instants a schedule fires at.

mod cron;
mod error;
mod expression;
mod occurrences;
mod stored;

pub use cron::{Cron, MAX_YEAR, MIN_YEAR};
pub use error::{ExpressionError, TimezoneError};
pub use expression::{Expression, ScheduleExpression};
pub use occurrences::{Schedule, at_instant, first_instant};
pub use stored::StoredScheduleError;

/// Parses an IANA time zone name (`Europe/Berlin`), with an error that says what it wanted.
pub fn parse_timezone(name: &str) -> Result<chrono_tz::Tz, TimezoneError> {
    name.parse::<chrono_tz::Tz>()
        .map_err(|_| TimezoneError(name.to_string()))
}
