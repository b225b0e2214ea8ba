//! A schedule as EventBridge Scheduler evaluates it: an expression in a time zone, between
//! an optional start and end date.
//!
//! Daylight saving follows AWS's documented behaviour: a cron time that the spring shift
//! skips does not run that day; a cron time in the repeated autumn hour runs once (at its
//! first instant); a rate counts absolute time (`rate(1 day)` is 24 hours).

use chrono::offset::LocalResult;
use chrono::{DateTime, Duration, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

use super::expression::{Expression, ScheduleExpression};

/// An expression with its zone and bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// What fires when; cron and `at` times are wall-clock times in `timezone`.
    pub expression: ScheduleExpression,
    /// `ScheduleExpressionTimezone` (UTC when not given).
    pub timezone: Tz,
    /// `StartDate`: nothing fires before it; a rate schedule counts from it.
    pub start: Option<DateTime<Utc>>,
    /// `EndDate`: nothing fires at or after it.
    pub end: Option<DateTime<Utc>>,
    /// When the schedule was created: a rate schedule without a start counts from here.
    pub created: Option<DateTime<Utc>>,
}

impl Schedule {
    /// A schedule in `timezone` with no start, end or creation time; set those fields after.
    pub fn new(expression: ScheduleExpression, timezone: Tz) -> Self {
        Schedule {
            expression,
            timezone,
            start: None,
            end: None,
            created: None,
        }
    }

    /// The first occurrence strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // EventBridge Scheduler ignores StartDate and EndDate for one-time schedules.
        if let Expression::At(local) = &self.expression.kind {
            let t = at_instant(self.timezone, *local);
            return (t > after).then_some(t);
        }
        let after = match self.start {
            // Strictly after "just before the start": the start itself may be an occurrence.
            Some(start) if start > after => start - Duration::nanoseconds(1),
            _ => after,
        };
        let next = match &self.expression.kind {
            Expression::Cron(cron) => {
                let mut local = after.with_timezone(&self.timezone).naive_local();
                loop {
                    let candidate = cron.next_after(local)?;
                    match first_instant(self.timezone, candidate) {
                        Some(t) if t > after => break t,
                        // Skipped by the spring shift, or already passed (the second run of
                        // the autumn's repeated hour): look further.
                        _ => local = candidate,
                    }
                }
            }
            Expression::Rate(interval) => {
                let anchor = self.start.or(self.created)?;
                if after < anchor {
                    anchor
                } else {
                    // Checked: a huge rate has no next run within the calendar's range.
                    let step = Duration::from_std(*interval).ok()?.num_milliseconds();
                    let elapsed = (after - anchor).num_milliseconds() / step;
                    let offset = step.checked_mul(elapsed.checked_add(1)?)?;
                    anchor.checked_add_signed(Duration::try_milliseconds(offset)?)?
                }
            }
            Expression::At(_) => return None, // answered above
        };
        match self.end {
            Some(end) if next >= end => None,
            _ => Some(next),
        }
    }

    /// Up to `n` occurrences strictly after `after`.
    pub fn next_n(&self, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let mut out = Vec::with_capacity(n);
        let mut t = after;
        while out.len() < n {
            match self.next_after(t) {
                Some(next) => {
                    out.push(next);
                    t = next;
                }
                None => break,
            }
        }
        out
    }

    /// Every occurrence in `[from, to)`.
    pub fn between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        let mut t = from - Duration::nanoseconds(1);
        while let Some(next) = self.next_after(t) {
            if next >= to {
                break;
            }
            out.push(next);
            t = next;
        }
        out
    }

    /// Whether nothing can fire after `now`: a one-time schedule whose instant has passed,
    /// or a schedule whose end date has.
    pub fn finished_by(&self, now: DateTime<Utc>) -> bool {
        match &self.expression.kind {
            Expression::At(local) => at_instant(self.timezone, *local) <= now,
            _ => self.end.is_some_and(|end| end <= now),
        }
    }

    /// The `StartDate` to send at `now`: the catalog's while it is ahead; once it has
    /// passed, the next run on its phase (the scheduler refuses a start more than five
    /// minutes ago, and a rate counts from its start, so dropping it would shift the
    /// phase). None when there is no start, for a one-time schedule (the scheduler ignores
    /// it) and when no run is left.
    pub fn start_to_send(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let start = self.start?;
        if self.expression.is_one_time() {
            return None;
        }
        if start > now {
            return Some(start);
        }
        self.next_after(now)
    }

    /// Whether `self` and `other` fire the same runs from `now` on (compared over their
    /// next few runs): two start dates on one phase, both passed, are the same schedule.
    pub fn same_runs_from(&self, other: &Schedule, now: DateTime<Utc>) -> bool {
        self.next_n(now, 3) == other.next_n(now, 3)
    }
}

/// The earliest instant a wall-clock time occurs in `tz`, if it occurs at all.
pub fn first_instant(tz: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t.with_timezone(&Utc)),
        LocalResult::None => None,
    }
}

/// The instant of a one-time `at()` schedule. A wall-clock time inside the spring gap is
/// read with the offset in force before the gap (02:30 becomes 03:30 summer time), so a
/// one-time schedule always fires.
pub fn at_instant(tz: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    first_instant(tz, local).unwrap_or_else(|| {
        let before = tz.offset_from_utc_datetime(&(local - Duration::hours(6)));
        let offset = chrono::Offset::fix(&before);
        Utc.from_utc_datetime(&(local - Duration::seconds(i64::from(offset.local_minus_utc()))))
    })
}
