//! Schedule expressions, table-driven: AWS documentation examples, every `L` / `W` / `#`
//! form, 29 February, daylight saving in both hemispheres, year bounds, rates, one-time
//! schedules, start and end dates, and invalid inputs with their error text.
//! Expected instants were worked out independently (Python's zoneinfo and calendar).

use chrono::{DateTime, Utc};
use schedkit::schedule::{Schedule, ScheduleExpression, parse_timezone};

struct Case {
    expression: &'static str,
    tz: &'static str,
    from: &'static str,
    start: Option<&'static str>,
    end: Option<&'static str>,
    /// The next occurrences after `from` (as many as listed, then none if `exhausted`).
    expect: &'static [&'static str],
    exhausted: bool,
}

const fn case(
    expression: &'static str,
    tz: &'static str,
    from: &'static str,
    expect: &'static [&'static str],
) -> Case {
    Case {
        expression,
        tz,
        from,
        start: None,
        end: None,
        expect,
        exhausted: false,
    }
}

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("{s}: {e}"))
        .with_timezone(&Utc)
}

#[test]
fn occurrences() {
    const UTC: &str = "UTC";
    const NY: &str = "America/New_York";
    const SYD: &str = "Australia/Sydney";
    let cases = [
        // AWS documentation examples.
        case(
            "cron(0 10 * * ? *)",
            UTC,
            "2026-11-29T12:00:00Z",
            &["2026-11-30T10:00:00Z", "2026-12-01T10:00:00Z"],
        ),
        case(
            "cron(15 12 * * ? *)",
            UTC,
            "2026-11-29T12:15:00Z",
            &["2026-11-30T12:15:00Z"],
        ),
        case(
            "cron(0 18 ? * MON-FRI *)",
            UTC,
            "2026-11-27T19:00:00Z",
            &["2026-11-30T18:00:00Z", "2026-12-01T18:00:00Z"],
        ),
        case(
            "cron(0 8 1 * ? *)",
            UTC,
            "2026-11-15T00:00:00Z",
            &["2026-12-01T08:00:00Z", "2027-01-01T08:00:00Z"],
        ),
        case(
            "cron(0/15 * * * ? *)",
            UTC,
            "2026-11-29T10:07:00Z",
            &[
                "2026-11-29T10:15:00Z",
                "2026-11-29T10:30:00Z",
                "2026-11-29T10:45:00Z",
            ],
        ),
        case(
            "cron(0/10 * ? * MON-FRI *)",
            UTC,
            "2026-11-27T23:55:00Z",
            &["2026-11-30T00:00:00Z", "2026-11-30T00:10:00Z"],
        ),
        case(
            "cron(0/5 8-17 ? * MON-FRI *)",
            UTC,
            "2026-11-30T17:56:00Z",
            &["2026-12-01T08:00:00Z", "2026-12-01T08:05:00Z"],
        ),
        case(
            "cron(0 9 ? * 2#1 *)",
            UTC,
            "2026-11-29T00:00:00Z",
            &["2026-12-07T09:00:00Z", "2027-01-04T09:00:00Z"],
        ),
        // L, LW, nW in day-of-month; L, nL, n#k in day-of-week.
        case(
            "cron(0 0 L * ? *)",
            UTC,
            "2027-02-01T00:00:00Z",
            &[
                "2027-02-28T00:00:00Z",
                "2027-03-31T00:00:00Z",
                "2027-04-30T00:00:00Z",
            ],
        ),
        case(
            "cron(0 12 LW * ? *)",
            UTC,
            "2027-01-01T00:00:00Z",
            &["2027-01-29T12:00:00Z", "2027-02-26T12:00:00Z"],
        ),
        case(
            "cron(0 12 15W * ? *)",
            UTC,
            "2026-11-01T00:00:00Z",
            &["2026-11-16T12:00:00Z", "2026-12-15T12:00:00Z"],
        ),
        case(
            "cron(0 12 1W * ? *)",
            UTC,
            "2026-07-02T00:00:00Z",
            &["2026-08-03T12:00:00Z", "2026-09-01T12:00:00Z"],
        ),
        case(
            "cron(0 12 31W * ? *)",
            UTC,
            "2027-01-01T00:00:00Z",
            &["2027-01-29T12:00:00Z", "2027-03-31T12:00:00Z"],
        ),
        case(
            "cron(0 9 ? * 6L *)",
            UTC,
            "2026-11-01T00:00:00Z",
            &["2026-11-27T09:00:00Z", "2026-12-25T09:00:00Z"],
        ),
        case(
            "cron(0 9 ? * L *)",
            UTC,
            "2026-11-29T00:00:00Z",
            &["2026-12-05T09:00:00Z", "2026-12-12T09:00:00Z"],
        ),
        case(
            "cron(0 9 ? * 6#3 *)",
            UTC,
            "2026-12-01T00:00:00Z",
            &["2026-12-18T09:00:00Z"],
        ),
        case(
            "cron(0 9 ? * SUN#5 *)",
            UTC,
            "2026-11-01T00:00:00Z",
            &["2026-11-29T09:00:00Z", "2027-01-31T09:00:00Z"],
        ),
        // 29 February: leap years only.
        case(
            "cron(0 0 29 2 ? *)",
            UTC,
            "2026-01-01T00:00:00Z",
            &["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"],
        ),
        Case {
            exhausted: true,
            ..case("cron(0 0 29 2 ? 2027)", UTC, "2026-01-01T00:00:00Z", &[])
        },
        case(
            "cron(0 0 L 2 ? *)",
            UTC,
            "2027-03-01T00:00:00Z",
            &["2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"],
        ),
        // Daylight saving, northern hemisphere: New York springs forward 2027-03-14, falls
        // back 2026-11-01; Berlin springs forward 2027-03-28.
        case(
            "cron(30 2 * * ? *)",
            NY,
            "2027-03-13T00:00:00Z",
            &["2027-03-13T07:30:00Z", "2027-03-15T06:30:00Z"],
        ),
        case(
            "cron(30 1 * * ? *)",
            NY,
            "2026-10-31T12:00:00Z",
            &["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
        ),
        case(
            "cron(0 * * * ? *)",
            NY,
            "2026-11-01T04:30:00Z",
            &[
                "2026-11-01T05:00:00Z",
                "2026-11-01T07:00:00Z",
                "2026-11-01T08:00:00Z",
            ],
        ),
        case(
            "cron(30 2 ? * SUN *)",
            "Europe/Berlin",
            "2027-03-20T00:00:00Z",
            &["2027-03-21T01:30:00Z", "2027-04-04T00:30:00Z"],
        ),
        // Southern hemisphere: Sydney springs forward 2026-10-04, falls back 2027-04-04.
        case(
            "cron(30 2 * * ? *)",
            SYD,
            "2026-10-02T12:00:00Z",
            &["2026-10-02T16:30:00Z", "2026-10-04T15:30:00Z"],
        ),
        case(
            "cron(30 2 * * ? *)",
            SYD,
            "2027-04-02T12:00:00Z",
            &[
                "2027-04-02T15:30:00Z",
                "2027-04-03T15:30:00Z",
                "2027-04-04T16:30:00Z",
            ],
        ),
        case(
            "cron(0 9 * * ? *)",
            "Asia/Kolkata",
            "2026-11-29T00:00:00Z",
            &["2026-11-29T03:30:00Z"],
        ),
        // Names, lists, ranges and steps.
        case(
            "cron(0 0 1 JAN,JUL ? *)",
            UTC,
            "2026-11-29T00:00:00Z",
            &["2027-01-01T00:00:00Z", "2027-07-01T00:00:00Z"],
        ),
        case(
            "cron(0 0 ? * mon,wed *)",
            UTC,
            "2026-11-29T00:00:00Z",
            &["2026-11-30T00:00:00Z", "2026-12-02T00:00:00Z"],
        ),
        case(
            "cron(0 0 1 */3 ? *)",
            UTC,
            "2026-11-29T00:00:00Z",
            &["2027-01-01T00:00:00Z", "2027-04-01T00:00:00Z"],
        ),
        case(
            "cron(0 0 10-20/5 * ? *)",
            UTC,
            "2026-11-29T00:00:00Z",
            &[
                "2026-12-10T00:00:00Z",
                "2026-12-15T00:00:00Z",
                "2026-12-20T00:00:00Z",
            ],
        ),
        case(
            "cron(0 0 1 1 ? 2027,2029-2030)",
            UTC,
            "2026-11-29T00:00:00Z",
            &[
                "2027-01-01T00:00:00Z",
                "2029-01-01T00:00:00Z",
                "2030-01-01T00:00:00Z",
            ],
        ),
        // Year bounds: nothing after 2199.
        Case {
            exhausted: true,
            ..case(
                "cron(0 0 1 1 ? 2199)",
                UTC,
                "2198-06-01T00:00:00Z",
                &["2199-01-01T00:00:00Z"],
            )
        },
        Case {
            exhausted: true,
            ..case(
                "cron(59 23 31 12 ? *)",
                UTC,
                "2199-12-31T00:00:00Z",
                &["2199-12-31T23:59:00Z"],
            )
        },
        // Rates: absolute time, a day is 24 hours across daylight saving.
        Case {
            start: Some("2026-10-31T12:00:00Z"),
            ..case(
                "rate(1 day)",
                NY,
                "2026-10-31T12:00:00Z",
                &["2026-11-01T12:00:00Z", "2026-11-02T12:00:00Z"],
            )
        },
        Case {
            start: Some("2026-11-29T10:15:00Z"),
            ..case(
                "rate(1 hour)",
                UTC,
                "2026-11-29T12:00:00Z",
                &["2026-11-29T12:15:00Z", "2026-11-29T13:15:00Z"],
            )
        },
        Case {
            start: Some("2026-11-29T10:00:00Z"),
            ..case(
                "rate(1 minute)",
                UTC,
                "2026-11-29T09:00:00Z",
                &["2026-11-29T10:00:00Z", "2026-11-29T10:01:00Z"],
            )
        },
        Case {
            start: Some("2026-11-29T10:00:00Z"),
            ..case(
                "rate(5 minutes)",
                UTC,
                "2026-11-29T10:00:00Z",
                &["2026-11-29T10:05:00Z"],
            )
        },
        Case {
            start: Some("2026-11-29T00:00:00Z"),
            ..case(
                "rate(3 days)",
                UTC,
                "2026-11-29T00:00:00Z",
                &["2026-12-02T00:00:00Z"],
            )
        },
        // A rate whose first step leaves the calendar's range has no next run (no panic).
        Case {
            start: Some("2026-11-29T00:00:00Z"),
            exhausted: true,
            ..case("rate(4000000000 days)", UTC, "2026-11-29T00:00:01Z", &[])
        },
        // One-time schedules, in the schedule's zone; one inside the spring gap still fires.
        Case {
            exhausted: true,
            ..case(
                "at(2026-12-24T18:00:00)",
                "Europe/Berlin",
                "2026-11-29T00:00:00Z",
                &["2026-12-24T17:00:00Z"],
            )
        },
        Case {
            exhausted: true,
            ..case(
                "at(2027-03-14T02:30:00)",
                NY,
                "2027-01-01T00:00:00Z",
                &["2027-03-14T07:30:00Z"],
            )
        },
        Case {
            exhausted: true,
            ..case("at(2020-01-01T00:00:00)", UTC, "2026-01-01T00:00:00Z", &[])
        },
        // AWS ignores StartDate and EndDate for one-time schedules.
        Case {
            start: Some("2030-06-01T00:00:00Z"),
            end: Some("2029-06-01T00:00:00Z"),
            exhausted: true,
            ..case(
                "at(2030-01-01T00:00:00)",
                UTC,
                "2029-12-01T00:00:00Z",
                &["2030-01-01T00:00:00Z"],
            )
        },
        // Start and end dates bound every kind.
        Case {
            start: Some("2026-11-29T10:30:00Z"),
            end: Some("2026-11-29T13:00:00Z"),
            exhausted: true,
            ..case(
                "cron(0 * * * ? *)",
                UTC,
                "2026-11-29T00:00:00Z",
                &["2026-11-29T11:00:00Z", "2026-11-29T12:00:00Z"],
            )
        },
    ];
    assert!(cases.len() >= 40);
    for c in &cases {
        let expression: ScheduleExpression = c.expression.parse().unwrap_or_else(|e| panic!("{e}"));
        let mut schedule = Schedule::new(expression, parse_timezone(c.tz).unwrap());
        schedule.start = c.start.map(utc);
        schedule.end = c.end.map(utc);
        let want: Vec<_> = c.expect.iter().map(|s| utc(s)).collect();
        let got = schedule.next_n(utc(c.from), want.len() + usize::from(c.exhausted));
        assert_eq!(got, want, "{} in {} after {}", c.expression, c.tz, c.from);
    }
}

#[test]
fn invalid_expressions_say_where_and_what_was_expected() {
    let cases = [
        (
            "cron(0 25 * * ? *)",
            "invalid schedule expression `cron(0 25 * * ? *)`: hours field at position 7: 25 is out of range, expected 0-23",
        ),
        (
            "cron(60 * * * ? *)",
            "invalid schedule expression `cron(60 * * * ? *)`: minutes field at position 5: 60 is out of range, expected 0-59",
        ),
        (
            "cron(0 0 32 * ? *)",
            "invalid schedule expression `cron(0 0 32 * ? *)`: day-of-month field at position 9: 32 is out of range, expected 1-31",
        ),
        (
            "cron(0 0 1 FOO ? *)",
            "invalid schedule expression `cron(0 0 1 FOO ? *)`: month field at position 11: `FOO` is not a value, expected 1-12 or JAN-DEC",
        ),
        (
            "cron(0 0 ? * 8 *)",
            "invalid schedule expression `cron(0 0 ? * 8 *)`: day-of-week field at position 13: 8 is out of range, expected 1-7 or SUN-SAT",
        ),
        (
            "cron(0 0 1 1 ? 1969)",
            "invalid schedule expression `cron(0 0 1 1 ? 1969)`: year field at position 15: 1969 is out of range, expected 1970-2199",
        ),
        (
            "cron(0 0 1 1 ? 2200)",
            "invalid schedule expression `cron(0 0 1 1 ? 2200)`: year field at position 15: 2200 is out of range, expected 1970-2199",
        ),
        (
            "cron(0 10 * * * *)",
            "invalid schedule expression `cron(0 10 * * * *)`: day-of-week field at position 14: one of day-of-month and day-of-week must be `?` (EventBridge does not combine them)",
        ),
        (
            "cron(0 10 ? * ? *)",
            "invalid schedule expression `cron(0 10 ? * ? *)`: day-of-week field at position 14: `?` may stand in only one of day-of-month and day-of-week",
        ),
        (
            "cron(0 10 * * ?)",
            "invalid schedule expression `cron(0 10 * * ?)` at position 5: expected 6 fields (minutes hours day-of-month month day-of-week year), found 5",
        ),
        (
            "cron(*/0 * * * ? *)",
            "invalid schedule expression `cron(*/0 * * * ? *)`: minutes field at position 7: step `0` must be a positive number",
        ),
        (
            "cron(0 5-2 * * ? *)",
            "invalid schedule expression `cron(0 5-2 * * ? *)`: hours field at position 7: range `5-2` runs backwards",
        ),
        (
            "cron(0 0 ? * MON#6 *)",
            "invalid schedule expression `cron(0 0 ? * MON#6 *)`: day-of-week field at position 17: `#6`: the week of the month must be 1-5",
        ),
        (
            "cron(0 0 ? * 2/2 *)",
            "invalid schedule expression `cron(0 0 ? * 2/2 *)`: day-of-week field at position 14: `/` is not allowed in day-of-week",
        ),
        (
            "cron(0 0 L,15 * ? *)",
            "invalid schedule expression `cron(0 0 L,15 * ? *)`: day-of-month field at position 9: `L` must stand alone in day-of-month (L, LW or nW)",
        ),
        (
            "cron(0 0 1-5W * ? *)",
            "invalid schedule expression `cron(0 0 1-5W * ? *)`: day-of-month field at position 9: `W` takes a single day, e.g. 15W",
        ),
        (
            "rate(1 minutes)",
            "invalid schedule expression `rate(1 minutes)` at position 7: with 1 the unit is singular: `minute`",
        ),
        (
            "rate(5 minute)",
            "invalid schedule expression `rate(5 minute)` at position 7: with 5 the unit is plural: `minutes`",
        ),
        (
            "rate(0 hours)",
            "invalid schedule expression `rate(0 hours)` at position 5: `0` is not a positive whole number",
        ),
        (
            "rate(18446744073709551615 days)",
            "invalid schedule expression `rate(18446744073709551615 days)` at position 5: `18446744073709551615` days is too long an interval",
        ),
        (
            "rate(2 weeks)",
            "invalid schedule expression `rate(2 weeks)` at position 7: unit `weeks` is not minute(s), hour(s) or day(s)",
        ),
        (
            "rate(5minutes)",
            "invalid schedule expression `rate(5minutes)` at position 5: expected `rate(value unit)`, e.g. rate(5 minutes)",
        ),
        (
            "at(2026-13-01T00:00:00)",
            "invalid schedule expression `at(2026-13-01T00:00:00)` at position 3: `2026-13-01T00:00:00` is not a time, expected yyyy-mm-ddThh:mm:ss",
        ),
        (
            "every(5 minutes)",
            "invalid schedule expression `every(5 minutes)` at position 0: unknown expression type `every`, expected cron, rate or at",
        ),
        (
            "cron(0 10 * * ? *",
            "invalid schedule expression `cron(0 10 * * ? *` at position 17: expected `)` at the end",
        ),
    ];
    for (expression, message) in cases {
        let error = expression
            .parse::<ScheduleExpression>()
            .expect_err(expression);
        assert_eq!(error.to_string(), message);
    }
    assert_eq!(
        parse_timezone("Mars/Olympus").unwrap_err().to_string(),
        "`Mars/Olympus` is not an IANA time zone name (e.g. Europe/Berlin, America/New_York, UTC)"
    );
}

/// The start a sync sends: the catalog's while ahead; once passed, the next run on its
/// phase; and starts sent at two syncs an hour apart are the same schedule by effect.
#[test]
fn a_passed_start_is_sent_as_the_next_run_on_its_phase_and_compares_by_effect() {
    let mut rate = Schedule::new(
        "rate(7 minutes)".parse::<ScheduleExpression>().unwrap(),
        parse_timezone("UTC").unwrap(),
    );
    rate.start = Some(utc("2020-01-01T00:17:00Z"));
    assert_eq!(
        rate.start_to_send(utc("2019-12-31T00:00:00Z")),
        Some(utc("2020-01-01T00:17:00Z")),
        "a start still ahead is sent as it is"
    );
    // 2026-12-01T12:00:00Z is 3,638,143 minutes after the start: 519,734 periods and 5 min.
    let first = rate.start_to_send(utc("2026-12-01T12:00:00Z")).unwrap();
    assert_eq!(first, utc("2026-12-01T12:02:00Z"));
    let later = rate.start_to_send(utc("2026-12-01T13:00:00Z")).unwrap();
    assert_eq!(later, utc("2026-12-01T13:05:00Z"));
    let with = |start| {
        let mut s = rate.clone();
        s.start = Some(start);
        s
    };
    let now = utc("2026-12-01T13:00:00Z");
    assert!(with(first).same_runs_from(&with(later), now));
    assert!(with(first).same_runs_from(&rate, now));
    assert!(
        !with(utc("2026-12-01T12:03:00Z")).same_runs_from(&rate, now),
        "a start off the phase is a different schedule"
    );
    let mut once = Schedule::new(
        "at(2020-03-01T02:00:00)"
            .parse::<ScheduleExpression>()
            .unwrap(),
        parse_timezone("Europe/Berlin").unwrap(),
    );
    once.start = Some(utc("2020-01-01T00:00:00Z"));
    assert!(once.finished_by(utc("2026-12-01T12:00:00Z")));
    assert_eq!(once.start_to_send(utc("2026-12-01T12:00:00Z")), None);
    assert!(!rate.finished_by(utc("2026-12-01T12:00:00Z")));
}
