//! EventBridge cron expressions: `minutes hours day-of-month month day-of-week year`.
//!
//! Written by hand: the cron crates on crates.io implement Unix or Quartz dialects (seconds
//! fields, 0-based weekdays, both day fields at once, no year field, or no `L`/`W`/`#`), and
//! none evaluates on wall-clock time in a zone the way EventBridge Scheduler documents it.
//! This module only knows the calendar; `schedule.rs` maps wall-clock times to instants.

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Timelike, Weekday};

use super::error::ExpressionError;

/// Earliest year a cron year field accepts (EventBridge's range is 1970-2199).
pub const MIN_YEAR: i32 = 1970;
/// Latest year a cron year field accepts.
pub const MAX_YEAR: i32 = 2199;

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
/// Day-of-week names; EventBridge numbers them 1-7 from Sunday.
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// A parsed cron expression (the part inside `cron(...)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: Days,
    /// Bits 1..=12.
    months: u16,
    /// Bit `y - MIN_YEAR`.
    years: [u64; 4],
}

/// Which day field is in force: EventBridge requires `?` in exactly one of them.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Days {
    OfMonth(DayOfMonth),
    OfWeek(DayOfWeek),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DayOfMonth {
    /// Bits 1..=31.
    Set(u32),
    /// `L`: the last day of the month.
    Last,
    /// `LW`: the last weekday (Monday to Friday) of the month.
    LastWeekday,
    /// `nW`: the weekday nearest to day `n`, within the same month.
    NearestWeekday(u32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DayOfWeek {
    /// Bits 1..=7 (1 = Sunday).
    Set(u8),
    /// `nL`: the last such weekday of the month.
    Last(u8),
    /// `n#k`: the k-th such weekday of the month.
    Nth(u8, u8),
}

/// One field's text and where it starts in the whole expression.
struct Field<'a> {
    name: &'static str,
    text: &'a str,
    offset: usize,
}

impl Cron {
    /// Parses the six fields. `offset` is where they start in `expression` (for errors).
    pub fn parse(fields: &str, expression: &str, offset: usize) -> Result<Cron, ExpressionError> {
        let names = [
            "minutes",
            "hours",
            "day-of-month",
            "month",
            "day-of-week",
            "year",
        ];
        let mut parts = Vec::new();
        let mut search = 0;
        for text in fields.split_whitespace() {
            let at = search
                + fields[search..]
                    .find(text)
                    .expect("token comes from this text");
            search = at + text.len();
            parts.push((text, offset + at));
        }
        if parts.len() != 6 {
            return Err(ExpressionError::new(
                expression,
                None,
                offset,
                format!(
                    "expected 6 fields (minutes hours day-of-month month day-of-week year), found {}",
                    parts.len()
                ),
            ));
        }
        let field = |i: usize| Field {
            name: names[i],
            text: parts[i].0,
            offset: parts[i].1,
        };
        let err = |f: &Field, at: usize, msg: String| {
            ExpressionError::new(expression, Some(f.name), f.offset + at, msg)
        };

        let minutes = numeric(&field(0), 0, 59, None, expression)?;
        let hours = numeric(&field(1), 0, 23, None, expression)? as u32;
        let months = numeric(&field(3), 1, 12, Some(&MONTHS), expression)? as u16;
        let years = year_set(&field(5), expression)?;
        let (dom, dow) = (field(2), field(4));
        let days = match (dom.text == "?", dow.text == "?") {
            (true, true) => {
                return Err(err(
                    &dow,
                    0,
                    "`?` may stand in only one of day-of-month and day-of-week".into(),
                ));
            }
            (false, false) => {
                return Err(err(
                    &dow,
                    0,
                    "one of day-of-month and day-of-week must be `?` (EventBridge does not combine them)".into(),
                ));
            }
            (false, true) => Days::OfMonth(day_of_month(&dom, expression)?),
            (true, false) => Days::OfWeek(day_of_week(&dow, expression)?),
        };
        Ok(Cron {
            minutes,
            hours,
            days,
            months,
            years,
        })
    }

    /// Whether a wall-clock time (to the minute) matches every field.
    pub fn matches(&self, t: NaiveDateTime) -> bool {
        t.second() == 0
            && self.year_ok(t.year())
            && self.months & (1 << t.month()) != 0
            && self.day_ok(t.date())
            && self.hours & (1 << t.hour()) != 0
            && self.minutes & (1 << t.minute()) != 0
    }

    /// The first matching wall-clock minute strictly after `t`, if any before year 2200.
    pub fn next_after(&self, t: NaiveDateTime) -> Option<NaiveDateTime> {
        let mut c = t.with_second(0)?.with_nanosecond(0)? + Duration::minutes(1);
        loop {
            let year = c.year();
            if year > MAX_YEAR {
                return None;
            }
            if !self.year_ok(year) {
                let next = (year.max(MIN_YEAR - 1) + 1..=MAX_YEAR).find(|y| self.year_ok(*y))?;
                c = midnight(NaiveDate::from_ymd_opt(next, 1, 1)?);
                continue;
            }
            if self.months & (1 << c.month()) == 0 {
                c = match (c.month() + 1..=12).find(|m| self.months & (1 << m) != 0) {
                    Some(m) => midnight(NaiveDate::from_ymd_opt(year, m, 1)?),
                    None => midnight(NaiveDate::from_ymd_opt(year + 1, 1, 1)?),
                };
                continue;
            }
            if !self.day_ok(c.date()) {
                c = midnight(c.date().succ_opt()?);
                continue;
            }
            if self.hours & (1 << c.hour()) == 0 {
                c = match (c.hour() + 1..24).find(|h| self.hours & (1 << h) != 0) {
                    Some(h) => c.date().and_hms_opt(h, 0, 0)?,
                    None => midnight(c.date().succ_opt()?),
                };
                continue;
            }
            if self.minutes & (1 << c.minute()) == 0 {
                c = match (c.minute() + 1..60).find(|m| self.minutes & (1 << m) != 0) {
                    Some(m) => c.date().and_hms_opt(c.hour(), m, 0)?,
                    None => c.date().and_hms_opt(c.hour(), 0, 0)? + Duration::hours(1),
                };
                continue;
            }
            return Some(c);
        }
    }

    fn year_ok(&self, year: i32) -> bool {
        (MIN_YEAR..=MAX_YEAR).contains(&year) && {
            let bit = (year - MIN_YEAR) as usize;
            self.years[bit / 64] & (1 << (bit % 64)) != 0
        }
    }

    fn day_ok(&self, date: NaiveDate) -> bool {
        let last = last_day(date.year(), date.month());
        let day = date.day();
        match &self.days {
            Days::OfMonth(DayOfMonth::Set(bits)) => bits & (1 << day) != 0,
            Days::OfMonth(DayOfMonth::Last) => day == last,
            Days::OfMonth(DayOfMonth::LastWeekday) => {
                let mut d = last;
                while is_weekend(date.with_day(d).expect("day of this month")) {
                    d -= 1;
                }
                day == d
            }
            Days::OfMonth(DayOfMonth::NearestWeekday(n)) => {
                if *n > last {
                    return false;
                }
                let target = date.with_day(*n).expect("n is within the month");
                let nearest = match target.weekday() {
                    Weekday::Sat if *n == 1 => 3,
                    Weekday::Sat => n - 1,
                    Weekday::Sun if *n == last => n - 2,
                    Weekday::Sun => n + 1,
                    _ => *n,
                };
                day == nearest
            }
            Days::OfWeek(dow) => {
                let weekday = date.weekday().num_days_from_sunday() as u8 + 1;
                match dow {
                    DayOfWeek::Set(bits) => bits & (1 << weekday) != 0,
                    DayOfWeek::Last(w) => weekday == *w && day + 7 > last,
                    DayOfWeek::Nth(w, k) => weekday == *w && (day - 1) / 7 + 1 == u32::from(*k),
                }
            }
        }
    }
}

fn midnight(d: NaiveDate) -> NaiveDateTime {
    d.and_time(NaiveTime::MIN)
}

fn is_weekend(d: NaiveDate) -> bool {
    matches!(d.weekday(), Weekday::Sat | Weekday::Sun)
}

pub(crate) fn last_day(year: i32, month: u32) -> u32 {
    let (y, m) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    NaiveDate::from_ymd_opt(y, m, 1)
        .and_then(|d| d.pred_opt())
        .map(|d| d.day())
        .unwrap_or(31)
}

/// A value (number or name) of a field.
fn value(
    text: &str,
    f: &Field,
    at: usize,
    min: u32,
    max: u32,
    names: Option<&[&str]>,
    expression: &str,
) -> Result<u32, ExpressionError> {
    let err = |msg: String| ExpressionError::new(expression, Some(f.name), f.offset + at, msg);
    if let Some(names) = names
        && let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(text))
    {
        return Ok(i as u32 + min);
    }
    let expected = match names {
        Some(n) => format!("{min}-{max} or {}-{}", n[0], n[n.len() - 1]),
        None => format!("{min}-{max}"),
    };
    if text.is_empty() {
        return Err(err(format!("missing value, expected {expected}")));
    }
    let n: u32 = text
        .parse()
        .map_err(|_| err(format!("`{text}` is not a value, expected {expected}")))?;
    if n < min || n > max {
        return Err(err(format!("{n} is out of range, expected {expected}")));
    }
    Ok(n)
}

/// A numeric field: `*`, values, ranges `a-b`, steps `a/s`, `*/s`, `a-b/s`, lists of those.
/// Returns a bitset (bit v for value v); fields up to 63 only.
fn numeric(
    f: &Field,
    min: u32,
    max: u32,
    names: Option<&[&str]>,
    expression: &str,
) -> Result<u64, ExpressionError> {
    Ok(values(f, min, max, names, expression)?
        .into_iter()
        .fold(0, |bits, v| bits | (1u64 << v)))
}

/// The year field, as a bitset over 1970..=2199 (230 bits).
fn year_set(f: &Field, expression: &str) -> Result<[u64; 4], ExpressionError> {
    let mut years = [0u64; 4];
    for y in values(f, MIN_YEAR as u32, MAX_YEAR as u32, None, expression)? {
        let bit = (y - MIN_YEAR as u32) as usize;
        years[bit / 64] |= 1 << (bit % 64);
    }
    Ok(years)
}

/// Every value a numeric field's list of items names.
fn values(
    f: &Field,
    min: u32,
    max: u32,
    names: Option<&[&str]>,
    expression: &str,
) -> Result<Vec<u32>, ExpressionError> {
    let mut out = Vec::new();
    let mut at = 0;
    for item in f.text.split(',') {
        let err = |offset: usize, msg: String| {
            ExpressionError::new(expression, Some(f.name), f.offset + at + offset, msg)
        };
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                    err(r.len() + 1, format!("step `{s}` must be a positive number"))
                })?;
                (r, Some(step))
            }
            None => (item, None),
        };
        let (lo, hi) = if range == "*" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            let lo = value(a, f, at, min, max, names, expression)?;
            let hi = value(b, f, at + a.len() + 1, min, max, names, expression)?;
            if lo > hi {
                return Err(err(0, format!("range `{range}` runs backwards")));
            }
            (lo, hi)
        } else {
            let v = value(range, f, at, min, max, names, expression)?;
            // `a/s` starts at a and steps to the end of the field.
            (v, if step.is_some() { max } else { v })
        };
        out.extend((lo..=hi).step_by(step.unwrap_or(1) as usize));
        at += item.len() + 1;
    }
    Ok(out)
}

fn day_of_month(f: &Field, expression: &str) -> Result<DayOfMonth, ExpressionError> {
    let err =
        |at: usize, msg: String| ExpressionError::new(expression, Some(f.name), f.offset + at, msg);
    let text = f.text.to_ascii_uppercase();
    if text == "L" {
        return Ok(DayOfMonth::Last);
    }
    if text == "LW" {
        return Ok(DayOfMonth::LastWeekday);
    }
    if let Some(day) = text.strip_suffix('W') {
        if day.contains([',', '-', '/', '*']) {
            return Err(err(0, "`W` takes a single day, e.g. 15W".into()));
        }
        return Ok(DayOfMonth::NearestWeekday(value(
            day, f, 0, 1, 31, None, expression,
        )?));
    }
    if let Some(i) = text.find(['L', 'W', '#']) {
        return Err(err(
            i,
            format!(
                "`{}` must stand alone in day-of-month (L, LW or nW)",
                &text[i..=i]
            ),
        ));
    }
    Ok(DayOfMonth::Set(numeric(f, 1, 31, None, expression)? as u32))
}

fn day_of_week(f: &Field, expression: &str) -> Result<DayOfWeek, ExpressionError> {
    let err =
        |at: usize, msg: String| ExpressionError::new(expression, Some(f.name), f.offset + at, msg);
    let text = f.text.to_ascii_uppercase();
    if text == "L" {
        // The last day of the week: Saturday.
        return Ok(DayOfWeek::Set(1 << 7));
    }
    if let Some((day, nth)) = text.split_once('#') {
        let w = value(day, f, 0, 1, 7, Some(&WEEKDAYS), expression)? as u8;
        let at = day.len() + 1;
        let k: u8 = nth
            .parse()
            .ok()
            .filter(|k| (1..=5).contains(k))
            .ok_or_else(|| err(at, format!("`#{nth}`: the week of the month must be 1-5")))?;
        return Ok(DayOfWeek::Nth(w, k));
    }
    if let Some(day) = text.strip_suffix('L')
        && !day.contains([',', '-', '/', '*'])
    {
        return Ok(DayOfWeek::Last(
            value(day, f, 0, 1, 7, Some(&WEEKDAYS), expression)? as u8,
        ));
    }
    if let Some(i) = text.find('/') {
        return Err(err(i, "`/` is not allowed in day-of-week".into()));
    }
    // A stray `L` or `W` fails here as "not a value".
    Ok(DayOfWeek::Set(
        numeric(f, 1, 7, Some(&WEEKDAYS), expression)? as u8,
    ))
}
