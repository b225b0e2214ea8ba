//! `schedkit catalog import` on a team's crontab: the catalog's next firings (`catalog
//! next`) equal the crontab's, computed here minute by minute from crontab(5)'s rules,
//! independently of schedkit's cron; the lines it cannot translate exactly are named.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, Duration, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use serde_json::Value;

use super::cli::{schedkit, stderr, stdout};

/// Thirty lines as a team's host has them: steps, ranges, lists, names, macros, a zone
/// change, variables, comments, and three lines no `cron()` can say exactly.
const CRONTAB: &str = "\
# m h dom mon dow command
SHELL=/bin/bash
PATH=/usr/local/bin:/usr/bin:/bin
MAILTO=ops@example.com

# reports
30 2 * * * /opt/reports/nightly.sh >> /var/log/nightly.log 2>&1
0 6 * * mon-fri /opt/reports/morning-summary --email
15 */4 * * * /opt/etl/pull-orders.py
*/20 8-18 * * 1-5 /opt/etl/sync-crm
0 0 1 * * /opt/billing/close-month
0 12 1,15 * * /opt/billing/mid-month-invoices
5 0 * jan,jul * /opt/hr/half-year
45 23 * * 0 /opt/backup/weekly-full
10-50/20 * * * * /opt/monitor/probe --quick
0 9 * * sat,sun /opt/reports/weekend
@daily /opt/maintenance/vacuum
@hourly /opt/maintenance/rotate
@weekly /opt/maintenance/reindex
@monthly /opt/maintenance/archive
0 3 * * 7 /opt/maintenance/sunday-seven
0 7 1-7 * * /opt/reports/first-week
30 4 */2 * * /opt/etl/every-other-day
CRON_TZ=America/New_York
0 9 * * 1-5 /opt/us/market-open
30 16 * * mon-fri /opt/us/market-close
0 0 * * * cd /srv/app && ./bin/export_orders.sh
@reboot /opt/agent/start
0 3 1 * mon /opt/billing/either-day
0 5 */2 * fri /opt/etl/both-days
";

/// The crontab's lines that must be refused, with a word of the reason each.
const REFUSED: [(usize, &str); 3] = [(28, "@reboot"), (29, "either"), (30, "both")];

#[test]
fn an_imported_crontab_fires_when_cron_would_and_its_untranslatable_lines_are_named() {
    let (catalog, out) = import("schedkit-import");
    assert_eq!(
        out.status.code(),
        Some(3),
        "some lines refused: {}",
        stderr(&out)
    );
    let said = stderr(&out);
    for (line, word) in REFUSED {
        let at = said
            .find(&format!("line {line}:"))
            .unwrap_or_else(|| panic!("line {line}: {said}"));
        assert!(
            said[at..].lines().nth(1).unwrap().contains(word),
            "line {line}: {said}"
        );
    }
    assert!(said.contains("20 jobs"), "{said}");
    assert_eq!(CRONTAB.lines().count(), 30);
    let toml = std::fs::read_to_string(&catalog).unwrap();
    let check = schedkit(&["--catalog", catalog.to_str().unwrap(), "catalog", "check"]);
    assert!(check.status.success(), "{}\n{toml}", stderr(&check));

    let from: DateTime<Utc> = "2027-01-03T23:59:30Z".parse().unwrap();
    let next = schedkit(&[
        "--catalog",
        catalog.to_str().unwrap(),
        "--output",
        "json",
        "catalog",
        "next",
        "--from",
        "2027-01-03T23:59:30Z",
        "-n",
        "6",
    ]);
    assert!(next.status.success(), "{}", stderr(&next));
    let rows: Vec<Value> = serde_json::from_str(&stdout(&next)).unwrap();
    let firings: BTreeMap<String, Vec<String>> = rows
        .iter()
        .map(|r| {
            let next = r["next"].as_array().unwrap();
            let next = next
                .iter()
                .map(|t| t.as_str().unwrap().to_string())
                .collect();
            (r["job"].as_str().unwrap().to_string(), next)
        })
        .collect();
    let lines = lines_of(&toml);
    assert_eq!(lines.len(), 20, "{toml}");
    // Cron ran each once, whatever its exit: none is retried.
    assert_eq!(
        toml.matches("retry = { max_attempts = 1 }").count(),
        20,
        "{toml}"
    );
    for (job, line) in lines {
        let (zone, entry) = crontab_line(line);
        let expected: Vec<String> = cron_firings(&entry, zone, from, 6)
            .iter()
            .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
            .collect();
        assert_eq!(
            firings[&job], expected,
            "{job} (crontab line {line}: {entry})"
        );
    }
}

/// `schedkit cost` counts the imported catalog's month as cron would run it: its firings
/// equal the crontab's over the same 30 days, counted minute by minute here; each is an
/// EventBridge Scheduler invocation on the bill.
#[test]
fn the_cost_of_an_imported_crontab_counts_the_firings_cron_would_make() {
    let (catalog, out) = import("schedkit-cost");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let path = catalog.to_str().unwrap();
    let from: DateTime<Utc> = "2027-01-04T00:00:00Z".parse().unwrap();
    let cost = schedkit(&[
        "--catalog",
        path,
        "--output",
        "json",
        "cost",
        "--from",
        "2027-01-04T00:00:00Z",
        "--days",
        "30",
    ]);
    assert!(cost.status.success(), "{}", stderr(&cost));
    let estimate: Value = serde_json::from_str(&stdout(&cost)).unwrap();
    let toml = std::fs::read_to_string(&catalog).unwrap();
    let cron: usize = lines_of(&toml)
        .values()
        .map(|line| {
            let (zone, entry) = crontab_line(*line);
            let before = from - Duration::seconds(30);
            cron_firings_until(&entry, zone, before, usize::MAX, from + Duration::days(30)).len()
        })
        .sum();
    assert_eq!(
        estimate["firings"].as_f64(),
        Some(cron as f64),
        "{estimate:#}"
    );
    let scheduler = estimate["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["item"] == "EventBridge Scheduler firings")
        .unwrap();
    // The jobs' firings and the accountant's checks, every five minutes.
    assert_eq!(
        scheduler["quantity"].as_f64(),
        Some(cron as f64 + 288.0 * 30.0)
    );
    let total: f64 = estimate["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["usd"].as_f64().unwrap())
        .sum();
    assert!((estimate["total_usd"].as_f64().unwrap() - total).abs() < 1e-9);
    assert!(
        estimate["prices_as_of"]
            .as_str()
            .unwrap()
            .contains("us-east-1")
    );
}

/// [`CRONTAB`] imported into a catalog in a directory of its own (named after `test`):
/// the catalog's path and what the import said.
fn import(test: &str) -> (std::path::PathBuf, std::process::Output) {
    let dir = std::env::temp_dir().join(format!("{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let crontab = dir.join("crontab");
    std::fs::write(&crontab, CRONTAB).unwrap();
    let catalog = dir.join("catalog.toml");
    let out = schedkit(&[
        "catalog",
        "import",
        crontab.to_str().unwrap(),
        "--owner",
        "platform",
        "--timezone",
        "Europe/Lisbon",
        "--out",
        catalog.to_str().unwrap(),
    ]);
    (catalog, out)
}

/// Each imported job's crontab line number, from its description.
fn lines_of(toml: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let mut job = None;
    for l in toml.lines() {
        if let Some(name) = l.strip_prefix("[jobs.").and_then(|r| r.strip_suffix(']')) {
            job = Some(name.to_string());
        }
        if let (Some(j), Some(rest)) = (&job, l.strip_prefix("description = \"crontab line ")) {
            let n = rest.split(':').next().unwrap().parse().unwrap();
            out.insert(j.clone(), n);
        }
    }
    out
}

/// Line `n`'s times (macros spelled out) and the zone cron ran it in.
fn crontab_line(n: usize) -> (Tz, String) {
    let mut zone: Tz = "Europe/Lisbon".parse().unwrap();
    for (i, line) in CRONTAB.lines().enumerate() {
        if let Some(z) = line.strip_prefix("CRON_TZ=") {
            zone = z.parse().unwrap();
        }
        if i + 1 == n {
            let times = match line.split_whitespace().next().unwrap() {
                "@daily" => "0 0 * * *".to_string(),
                "@hourly" => "0 * * * *".to_string(),
                "@weekly" => "0 0 * * 0".to_string(),
                "@monthly" => "0 0 1 * *".to_string(),
                _ => line
                    .split_whitespace()
                    .take(5)
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            return (zone, times);
        }
    }
    panic!("no line {n}")
}

/// The first `count` minutes at or after `from` (in `zone`'s wall clock) that crontab(5)
/// runs `times` at: minute, hour and month must match; the days match when both day
/// fields do, or, with both restricted and neither starting with `*`, when either does.
fn cron_firings(times: &str, zone: Tz, from: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
    cron_firings_until(times, zone, from, count, DateTime::<Utc>::MAX_UTC)
}

/// [`cron_firings`], before `until` too.
fn cron_firings_until(
    times: &str,
    zone: Tz,
    from: DateTime<Utc>,
    count: usize,
    until: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let f: Vec<&str> = times.split(' ').collect();
    let minute = set(f[0], 0, 59);
    let hour = set(f[1], 0, 23);
    let dom = set(f[2], 1, 31);
    let month = set(f[3], 1, 12);
    let mut dow = set(f[4], 0, 7);
    if dow[7] {
        dow[0] = true;
    }
    let either = !f[2].starts_with('*') && !f[4].starts_with('*');
    let mut t = Utc.from_utc_datetime(&from.naive_utc())
        + Duration::seconds(59 - i64::from(from.second()) + 1);
    t = t.with_second(0).unwrap();
    let mut out = Vec::new();
    while out.len() < count && t < until {
        let local = t.with_timezone(&zone);
        let (d, w) = (
            dom[local.day() as usize],
            dow[local.weekday().num_days_from_sunday() as usize],
        );
        let day = if either { d || w } else { d && w };
        if minute[local.minute() as usize]
            && hour[local.hour() as usize]
            && month[local.month() as usize]
            && day
        {
            out.push(t);
        }
        t += Duration::minutes(1);
    }
    out
}

/// Which values of lo..=hi a field matches (numbers, `*`, ranges, steps, names, lists).
fn set(field: &str, lo: usize, hi: usize) -> Vec<bool> {
    const NAMES: [&str; 19] = [
        "sun", "mon", "tue", "wed", "thu", "fri", "sat", "jan", "feb", "mar", "apr", "may", "jun",
        "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let value = |s: &str| -> usize {
        match NAMES.iter().position(|n| n.eq_ignore_ascii_case(s)) {
            Some(i) if i < 7 => i,
            Some(i) => i - 6,
            None => s.parse().unwrap(),
        }
    };
    let mut on = vec![false; hi + 1];
    for part in field.split(',') {
        let (range, step) = part
            .split_once('/')
            .map_or((part, 1), |(r, s)| (r, s.parse().unwrap()));
        let (a, b) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a), value(b))
        } else {
            (value(range), value(range))
        };
        for v in (a..=b).step_by(step) {
            on[v] = true;
        }
    }
    on
}
