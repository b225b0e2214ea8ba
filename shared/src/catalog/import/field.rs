//! One crontab time field as the set of values it matches, with how it was written (cron's
//! day rule depends on whether a day field starts with `*`).
//!
//! Written by hand: the cron crates on crates.io parse their own dialects (seconds fields,
//! Quartz's `?`, `L`, `#`) into schedules, not a Vixie/cronie field into the set it matches,
//! which is what an exact translation needs.

use std::collections::BTreeSet;

/// Which field, with its range and the names it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// 0-59.
    Minute,
    /// 0-23.
    Hour,
    /// 1-31.
    DayOfMonth,
    /// 1-12, or `jan`-`dec`.
    Month,
    /// 0-7 (0 and 7 are Sunday), or `sun`-`sat`.
    DayOfWeek,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Field {
    /// What crontab(5) calls it.
    pub fn name(self) -> &'static str {
        match self {
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day of month",
            Field::Month => "month",
            Field::DayOfWeek => "day of week",
        }
    }

    /// The values the field may hold (day of week: 0-7, 7 being Sunday again).
    pub fn range(self) -> (u32, u32) {
        match self {
            Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::DayOfMonth => (1, 31),
            Field::Month => (1, 12),
            Field::DayOfWeek => (0, 7),
        }
    }

    fn value(self, text: &str) -> Option<u32> {
        if let Ok(n) = text.parse::<u32>() {
            let (lo, hi) = self.range();
            return (lo..=hi).contains(&n).then_some(n);
        }
        let lower = text.to_ascii_lowercase();
        let names: &[&str] = match self {
            Field::Month => &MONTHS,
            Field::DayOfWeek => &DAYS,
            _ => return None,
        };
        let offset = if self == Field::Month { 1 } else { 0 };
        names
            .iter()
            .position(|n| *n == lower)
            .map(|i| i as u32 + offset)
    }
}

/// A field parsed: the values it matches (day of week folded to 0-6) and whether it was
/// written starting with `*` (cron's rule for combining the two day fields reads that).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Values {
    /// Matched values; day of week 0-6 from Sunday.
    pub set: BTreeSet<u32>,
    /// Written as `*` or `*/n`: cron then requires both day fields to match.
    pub starts_with_star: bool,
}

impl Values {
    /// Every value of the field's range is matched.
    pub fn is_full(&self, field: Field) -> bool {
        let (lo, hi) = match field {
            Field::DayOfWeek => (0, 6),
            f => f.range(),
        };
        (lo..=hi).all(|v| self.set.contains(&v))
    }
}

/// Parses one field: `*`, values, names, ranges `a-b`, steps `*/n`, `a-b/n` and `a/n` (from
/// `a` to the field's end), and lists of those.
pub fn parse(field: Field, text: &str) -> Result<Values, String> {
    let (lo, hi) = field.range();
    let mut set = BTreeSet::new();
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step = s.parse::<u32>().ok().filter(|s| *s > 0).ok_or_else(|| {
                    format!(
                        "{} field `{text}`: step `{s}` must be a positive number",
                        field.name()
                    )
                })?;
                (r, step)
            }
            None => (item, 1),
        };
        let (from, to) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(field, text, a)?, value(field, text, b)?)
        } else {
            let v = value(field, text, range)?;
            (v, if item.contains('/') { hi } else { v })
        };
        if from > to {
            return Err(format!(
                "{} field `{text}`: the range `{range}` runs backwards (cron does not wrap around)",
                field.name()
            ));
        }
        set.extend((from..=to).step_by(step as usize));
    }
    if field == Field::DayOfWeek && set.remove(&7) {
        set.insert(0);
    }
    Ok(Values {
        set,
        starts_with_star: text.starts_with('*'),
    })
}

fn value(field: Field, text: &str, part: &str) -> Result<u32, String> {
    field.value(part).ok_or_else(|| {
        let (lo, hi) = field.range();
        let names = match field {
            Field::Month => " or a month's name (jan-dec)",
            Field::DayOfWeek => " or a day's name (sun-sat)",
            _ => "",
        };
        format!(
            "{} field `{text}`: `{part}` is not {lo}-{hi}{names}",
            field.name()
        )
    })
}

/// The values as an EventBridge field: `*`, `a/n` when they step from `a` to the field's
/// end, else a list of single values and ranges. Day-of-week values are 0-6 from Sunday
/// and come out as EventBridge's names (`MON-FRI`), which no numbering can confuse.
pub fn render(field: Field, values: &Values) -> String {
    if values.is_full(field) {
        return "*".into();
    }
    let set: Vec<u32> = values.set.iter().copied().collect();
    let (_, hi) = field.range();
    let name = |v: u32| match field {
        Field::DayOfWeek => DAYS[v as usize].to_ascii_uppercase(),
        _ => v.to_string(),
    };
    if field != Field::DayOfWeek && set.len() >= 3 {
        let step = set[1] - set[0];
        let regular = set.windows(2).all(|w| w[1] - w[0] == step);
        if step > 1 && regular && set[set.len() - 1] + step > hi {
            return format!("{}/{step}", set[0]);
        }
    }
    let mut parts = Vec::new();
    let mut i = 0;
    while i < set.len() {
        let mut j = i;
        while j + 1 < set.len() && set[j + 1] == set[j] + 1 {
            j += 1;
        }
        match j - i {
            0 => parts.push(name(set[i])),
            1 => parts.extend([name(set[i]), name(set[j])]),
            _ => parts.push(format!("{}-{}", name(set[i]), name(set[j]))),
        }
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(field: Field, text: &str) -> Vec<u32> {
        parse(field, text).unwrap().set.into_iter().collect()
    }

    #[test]
    fn steps_ranges_lists_and_names_match_what_crontab_5_says() {
        assert_eq!(set(Field::Minute, "*/15"), [0, 15, 30, 45]);
        assert_eq!(set(Field::Minute, "10-30/10,59"), [10, 20, 30, 59]);
        assert_eq!(set(Field::Minute, "5/20"), [5, 25, 45]);
        assert_eq!(set(Field::Month, "Jan,jun-AUG"), [1, 6, 7, 8]);
        assert_eq!(set(Field::DayOfWeek, "sat-7"), [0, 6]);
        assert_eq!(set(Field::DayOfWeek, "mon-fri"), [1, 2, 3, 4, 5]);
    }

    #[test]
    fn what_cron_refuses_is_refused_with_the_field_named() {
        for (field, text, says) in [
            (Field::Minute, "60", "minute field `60`: `60` is not 0-59"),
            (Field::Hour, "5-2", "runs backwards"),
            (Field::DayOfWeek, "L", "or a day's name"),
            (Field::Minute, "*/0", "step `0` must be a positive number"),
            (Field::DayOfMonth, "0", "is not 1-31"),
        ] {
            let error = parse(field, text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn rendered_fields_are_eventbridges() {
        let r = |field, text| render(field, &parse(field, text).unwrap());
        assert_eq!(r(Field::Minute, "*/15"), "0/15");
        assert_eq!(r(Field::Minute, "*"), "*");
        assert_eq!(r(Field::Hour, "0-23/1"), "*");
        assert_eq!(r(Field::Hour, "9-17"), "9-17");
        assert_eq!(r(Field::Hour, "1,2,5,6,7"), "1,2,5-7");
        assert_eq!(r(Field::Minute, "0-30/10"), "0,10,20,30");
        assert_eq!(r(Field::DayOfWeek, "1-5"), "MON-FRI");
        assert_eq!(r(Field::DayOfWeek, "0,6"), "SUN,SAT");
        assert_eq!(r(Field::DayOfWeek, "7"), "SUN");
        assert_eq!(r(Field::DayOfMonth, "1-31"), "*");
    }
}
