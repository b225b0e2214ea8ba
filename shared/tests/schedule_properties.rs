//! Properties of cron schedules in any zone: occurrences strictly increase, each one
//! matches the expression (on the zone's wall clock, at the first instant of that wall
//! time), and no matching minute is skipped between two consecutive occurrences.
//! The search (`next_after`) is checked against a minute-by-minute scan that uses only the
//! field match and the zone's offsets.

use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;
use schedkit::schedule::{Expression, Schedule, ScheduleExpression, first_instant, parse_timezone};

const ZONES: [&str; 7] = [
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Sydney",
    "Asia/Kolkata",
    "America/St_Johns",
    "Pacific/Chatham",
];

fn expression() -> impl Strategy<Value = String> {
    let minutes = prop::sample::select(vec!["*/15", "0", "5,35", "10-20/5", "0/7", "30"]);
    let hours = prop::sample::select(vec!["*", "1", "2", "0-3", "*/6", "1,2,3", "23"]);
    let days = prop::sample::select(vec![
        ("*", "?"),
        ("L", "?"),
        ("LW", "?"),
        ("15W", "?"),
        ("1,15", "?"),
        ("?", "MON-FRI"),
        ("?", "6L"),
        ("?", "2#1"),
        ("?", "SUN"),
        ("?", "*"),
    ]);
    let months = prop::sample::select(vec!["*", "*/2", "MAR,APR,OCT,NOV", "3-11"]);
    (minutes, hours, days, months)
        .prop_map(|(mi, h, (dom, dow), mo)| format!("cron({mi} {h} {dom} {mo} {dow} *)"))
}

/// The independent check: `t` is an occurrence if its wall time in `zone` matches the
/// fields and `t` is the first instant showing that wall time.
fn matches(schedule: &Schedule, t: DateTime<Utc>) -> bool {
    let Expression::Cron(cron) = &schedule.expression.kind else {
        unreachable!()
    };
    let local = t.with_timezone(&schedule.timezone).naive_local();
    cron.matches(local) && first_instant(schedule.timezone, local) == Some(t)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn occurrences_increase_match_and_skip_nothing(
        text in expression(),
        zone in prop::sample::select(ZONES.to_vec()),
        // Any minute of 2026-2028, DST transitions included.
        minute in 0i64..(3 * 366 * 24 * 60),
    ) {
        let expression: ScheduleExpression = text.parse().unwrap();
        let schedule = Schedule::new(expression, parse_timezone(zone).unwrap());
        let from = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + Duration::minutes(minute);
        let occurrences = schedule.next_n(from, 4);
        prop_assert_eq!(occurrences.len(), 4, "{} in {} after {}", text, zone, from);
        let mut previous = from;
        for t in occurrences {
            prop_assert!(t > previous, "{} after {} in {}", t, previous, zone);
            prop_assert!(matches(&schedule, t), "{} is not an occurrence of {} in {}", t, text, zone);
            // Nothing between the previous occurrence (or the start) and this one.
            let mut m = previous + Duration::minutes(1) - Duration::seconds(i64::from(previous.timestamp() as i32 % 60));
            while m < t {
                prop_assert!(!matches(&schedule, m), "{} skipped {} before {} in {}", text, m, t, zone);
                m += Duration::minutes(1);
            }
            previous = t;
        }
    }
}
