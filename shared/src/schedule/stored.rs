//! A schedule as EventBridge Scheduler returns it (`GetSchedule`), read back into a
//! [`Schedule`]: the local firing engine fires it, a pause or resume re-sends its start.

use aws_sdk_scheduler::operation::get_schedule::GetScheduleOutput;
use aws_sdk_scheduler::primitives::DateTime as SmithyTime;
use chrono::{DateTime, Utc};

use super::{ExpressionError, Schedule, ScheduleExpression, TimezoneError, parse_timezone};

/// Why a stored schedule is not one schedkit can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoredScheduleError {
    /// Its expression.
    #[error(transparent)]
    Expression(#[from] ExpressionError),
    /// Its time zone.
    #[error(transparent)]
    Timezone(#[from] TimezoneError),
}

fn instant(t: Option<SmithyTime>) -> Option<DateTime<Utc>> {
    t.and_then(|t| DateTime::from_timestamp(t.secs(), t.subsec_nanos()))
}

impl Schedule {
    /// The expression, time zone, start, end and creation time of a stored schedule.
    pub fn from_stored(s: &GetScheduleOutput) -> Result<Schedule, StoredScheduleError> {
        let expression: ScheduleExpression = s
            .schedule_expression
            .as_deref()
            .unwrap_or_default()
            .parse()?;
        let timezone = parse_timezone(s.schedule_expression_timezone.as_deref().unwrap_or("UTC"))?;
        let mut schedule = Schedule::new(expression, timezone);
        schedule.start = instant(s.start_date);
        schedule.end = instant(s.end_date);
        schedule.created = instant(s.creation_date);
        Ok(schedule)
    }
}
