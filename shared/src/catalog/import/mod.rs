//! `schedkit catalog import`: a crontab turned into catalog entries, each line a job that
//! runs the line's command on a polling host at the times cron would have, or a reason why
//! it cannot be translated exactly.
//!
//! Cron's semantics are Vixie cron's and cronie's (crontab(5)): five time fields (six in a
//! system crontab, the user after them), `@hourly`...`@yearly`, names of months and days,
//! day of week 0-7, `CRON_TZ` for the lines after it, other variables given to the
//! commands, `%` as a newline. The two day fields are the hard part: cron runs a line when
//! *either* matches if both are restricted and neither starts with `*`, and when *both*
//! match otherwise; EventBridge's `cron()` takes one of them (the other is `?`). Every line
//! whose days need both is refused, with the reason and the way out.

mod field;
mod imported;
mod line;
mod render;

use std::collections::{BTreeMap, BTreeSet};

pub use field::Field;
pub use imported::{Imported, ImportedJob, Refused};
pub use line::Entry;

/// How to read the crontab.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The zone cron ran the lines in (the host's, unless given): each schedule's zone
    /// until a `CRON_TZ=` line says otherwise.
    pub timezone: String,
    /// A system crontab (`/etc/crontab`, `/etc/cron.d/*`): a user field after the times.
    pub system: bool,
    /// Who owns the imported jobs (the catalog requires an owner per job).
    pub owner: String,
}

/// Reads a crontab. Blank lines and comments are skipped; every other line is a job, a
/// variable, or refused.
pub fn import(text: &str, options: &ImportOptions) -> Imported {
    let mut out = Imported::default();
    let mut scope = Scope {
        zone: zone_named(&options.timezone),
        env: BTreeMap::new(),
        shell: None,
    };
    let mut comment: Vec<String> = Vec::new();
    let mut names = BTreeSet::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            comment.clear();
            continue;
        }
        if let Some(text) = trimmed.strip_prefix('#') {
            comment.push(text.trim().to_string());
            continue;
        }
        let above = (!comment.is_empty()).then(|| comment.join(" "));
        comment.clear();
        if let Some((name, value)) = line::variable(trimmed) {
            scope.set(name, value, number, &mut out.notes);
            continue;
        }
        let refuse = |reason: String| Refused {
            line: number,
            source: trimmed.to_string(),
            reason,
        };
        let entry = match line::entry(trimmed, options.system) {
            Ok(entry) => entry,
            Err(reason) => {
                out.refused.push(refuse(reason));
                continue;
            }
        };
        let timezone = match &scope.zone {
            Ok(z) => z.clone(),
            Err(e) => {
                out.refused.push(refuse(e.clone()));
                continue;
            }
        };
        let expression = match render::expression(&entry) {
            Ok(e) => e,
            Err(reason) => {
                out.refused.push(refuse(reason));
                continue;
            }
        };
        let name = unique(line::name_for(&entry.command), &mut names);
        out.jobs.push(ImportedJob {
            name,
            line: number,
            source: trimmed.to_string(),
            comment: above,
            expression,
            timezone,
            command: entry.command,
            stdin: entry.stdin,
            env: scope.env.clone(),
            user: entry.user,
            shell: scope.shell.clone(),
        });
    }
    out
}

impl Imported {
    /// The jobs as catalog TOML (`[jobs.<name>]` tables), ready to paste into a catalog,
    /// with the refused lines as comments at the end so that none is forgotten.
    pub fn to_toml(&self, owner: &str) -> String {
        render::catalog(self, owner)
    }
}

/// What the variable lines above a job line set for it.
struct Scope {
    zone: Result<String, String>,
    env: BTreeMap<String, String>,
    shell: Option<String>,
}

impl Scope {
    /// A `NAME=value` line on line `number`: the zone, the shell, a note, or a variable.
    fn set(&mut self, name: String, value: String, number: usize, notes: &mut Vec<String>) {
        match name.as_str() {
            // Cron (cronie) schedules the lines after a `CRON_TZ` in its zone; `TZ` only
            // reaches the commands' environment, as any variable.
            "CRON_TZ" => {
                self.zone =
                    zone_named(&value).map_err(|e| format!("{e} (`{name}` on line {number})"));
            }
            "SHELL" => self.shell = Some(value),
            "MAILTO" | "MAILFROM" => note(
                notes,
                format!(
                    "`{name}` is not carried: a failed run's output is on its record and in the dead letter, and the stage's alarms name the job"
                ),
            ),
            _ => {
                self.env.insert(name, value);
            }
        }
    }
}

fn zone_named(name: &str) -> Result<String, String> {
    crate::schedule::parse_timezone(name)
        .map(|_| name.to_string())
        .map_err(|e| e.to_string())
}

fn note(notes: &mut Vec<String>, text: String) {
    if !notes.contains(&text) {
        notes.push(text);
    }
}

fn unique(base: String, taken: &mut BTreeSet<String>) -> String {
    let mut name = base.clone();
    let mut n = 2;
    while !taken.insert(name.clone()) {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

/// The host's IANA zone (from `TZ`, else the system's setting), for a crontab read without
/// `--timezone`: cron runs its lines in the host's zone.
pub fn host_timezone() -> Result<String, String> {
    if let Ok(tz) = std::env::var("TZ") {
        let tz = tz.trim_start_matches(':').to_string();
        if !tz.is_empty() && zone_named(&tz).is_ok() {
            return Ok(tz);
        }
    }
    iana_time_zone::get_timezone().map_err(|e| {
        format!("the host's time zone could not be read ({e}); give it with --timezone")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> Imported {
        import(
            text,
            &ImportOptions {
                timezone: "Europe/Lisbon".into(),
                system: false,
                owner: "ops".into(),
            },
        )
    }

    fn expression(line: &str) -> Result<String, String> {
        let out = run(line);
        match (out.jobs.first(), out.refused.first()) {
            (Some(job), None) => Ok(job.expression.clone()),
            (None, Some(r)) => Err(r.reason.clone()),
            _ => panic!("{line}: {out:?}"),
        }
    }

    #[test]
    fn times_translate_to_eventbridges_cron_with_its_question_mark() {
        for (line, want) in [
            ("30 2 * * * a", "cron(30 2 * * ? *)"),
            ("*/5 9-17 * * mon-fri a", "cron(0/5 9-17 ? * MON-FRI *)"),
            ("0 0 1,15 * * a", "cron(0 0 1,15 * ? *)"),
            ("0 6 * jan,jul 0 a", "cron(0 6 ? 1,7 SUN *)"),
            ("@daily a", "cron(0 0 * * ? *)"),
            ("@weekly a", "cron(0 0 ? * SUN *)"),
            ("@yearly a", "cron(0 0 1 1 ? *)"),
            ("@hourly a", "cron(0 * * * ? *)"),
            // OR with a day field matching every day is every day.
            ("0 3 1-31 * 1 a", "cron(0 3 * * ? *)"),
            ("0 3 1 * 0-7 a", "cron(0 3 * * ? *)"),
            // AND (a field starts with `*`) with one that matches every day.
            ("0 3 */1 * 5 a", "cron(0 3 ? * FRI *)"),
            ("0 3 10 * */1 a", "cron(0 3 10 * ? *)"),
        ] {
            assert_eq!(expression(line).as_deref(), Ok(want), "{line}");
        }
    }

    #[test]
    fn lines_that_cannot_be_exact_are_refused_with_why() {
        for (line, says) in [
            ("0 3 1 * 1 a", "days matching either"),
            ("0 3 */2 * 1 a", "days matching both"),
            ("@reboot /opt/start", "when the host starts"),
            ("@every5m x", "not one of cron's"),
            ("61 * * * * x", "minute field `61`"),
            ("* * * *", "five time fields"),
        ] {
            let error = expression(line).unwrap_err();
            assert!(error.contains(says), "{line}: {error}");
        }
    }

    #[test]
    fn tz_reaches_the_command_but_only_cron_tz_moves_the_schedule() {
        let out = run("TZ=Asia/Tokyo\n0 1 * * * /opt/report.sh\n");
        let [job] = &out.jobs[..] else {
            panic!("{out:?}")
        };
        assert_eq!(
            job.timezone, "Europe/Lisbon",
            "cron schedules by CRON_TZ alone"
        );
        assert_eq!(job.env.get("TZ").map(String::as_str), Some("Asia/Tokyo"));
    }

    #[test]
    fn variables_zones_and_comments_carry_to_the_lines_below() {
        let out = run(
            "MAILTO=ops@example.com\nPATH=/usr/local/bin:/usr/bin\n# the nightly export\n0 1 * * * /opt/export.sh\nCRON_TZ=America/New_York\n0 1 * * * /opt/export.sh --us\nCRON_TZ=Mars/Olympus\n0 2 * * * late\n",
        );
        let [first, second] = &out.jobs[..] else {
            panic!("{out:?}")
        };
        assert_eq!(first.name, "export");
        assert_eq!(second.name, "export-2");
        assert_eq!(first.timezone, "Europe/Lisbon");
        assert_eq!(second.timezone, "America/New_York");
        assert_eq!(first.comment.as_deref(), Some("the nightly export"));
        assert_eq!(second.comment, None);
        assert_eq!(
            first.env.get("PATH").map(String::as_str),
            Some("/usr/local/bin:/usr/bin")
        );
        assert!(!first.env.contains_key("MAILTO"));
        assert_eq!(out.notes.len(), 1, "{:?}", out.notes);
        assert_eq!(out.refused.len(), 1);
        assert_eq!(out.refused[0].line, 8);
        assert!(
            out.refused[0].reason.contains("Mars/Olympus"),
            "{:?}",
            out.refused
        );
        assert!(
            out.refused[0].reason.contains("line 7"),
            "{:?}",
            out.refused
        );
    }

    #[test]
    fn the_toml_loads_as_a_catalog_and_lists_what_was_refused() {
        let out = run("0 1 * * * /opt/a.sh\n@reboot /opt/b\n");
        let toml = out.to_toml("data-team");
        assert!(toml.contains("#   line 2: @reboot /opt/b"), "{toml}");
        let catalog = crate::catalog::Catalog::parse(&toml, "imported.toml")
            .unwrap_or_else(|e| panic!("{e}\n{toml}"));
        let job = &catalog.jobs["a"];
        assert_eq!(job.spec.owner, "data-team");
        assert_eq!(
            job.spec.description.as_deref(),
            Some("crontab line 1: 0 1 * * * /opt/a.sh")
        );
    }
}
