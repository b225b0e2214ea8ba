//! One crontab line: a variable, or times and a command (and a user in a system crontab).

use super::field::{self, Field, Values};

/// A job line, parsed.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Minute, hour, day of month, month, day of week.
    pub fields: [Values; 5],
    /// The user of a system crontab's line.
    pub user: Option<String>,
    /// The command, `\%` turned into `%`, up to the first unescaped `%`.
    pub command: String,
    /// What followed the first unescaped `%`, its `%`s turned into newlines: cron gave it
    /// to the command on its standard input.
    pub stdin: Option<String>,
}

const FIELDS: [Field; 5] = [
    Field::Minute,
    Field::Hour,
    Field::DayOfMonth,
    Field::Month,
    Field::DayOfWeek,
];

/// `NAME=value` (spaces around `=` allowed, the value optionally quoted), or None.
pub fn variable(line: &str) -> Option<(String, String)> {
    let (name, value) = line.split_once('=')?;
    let name = name.trim();
    let first = name.chars().next()?;
    if !(first.is_ascii_alphabetic() || first == '_')
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return None;
    }
    let value = value.trim();
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
        .unwrap_or(value);
    Some((name.to_string(), unquoted.to_string()))
}

/// A job line: its times (or `@name`), the user in a system crontab, the command.
pub fn entry(line: &str, system: bool) -> Result<Entry, String> {
    // cronie: a leading `-` only silences the line's syslog entry.
    let line = line.strip_prefix('-').unwrap_or(line);
    let (times, rest): (Vec<&str>, &str) = if let Some(word) = line.strip_prefix('@') {
        let (name, rest) = split_word(word);
        (macro_times(name)?.split(' ').collect(), rest)
    } else {
        let mut rest = line;
        let mut times = Vec::new();
        for _ in 0..5 {
            let (word, after) = split_word(rest);
            if word.is_empty() {
                return Err("a job line needs five time fields and a command".into());
            }
            times.push(word);
            rest = after;
        }
        (times, rest)
    };
    let (user, rest) = if system {
        let (user, rest) = split_word(rest);
        if user.is_empty() {
            return Err("a system crontab's line names its user after the time fields".into());
        }
        (Some(user.to_string()), rest)
    } else {
        (None, rest)
    };
    let (command, stdin) = command(rest.trim())?;
    if command.trim().is_empty() {
        return Err("the line has no command".into());
    }
    let mut fields = Vec::with_capacity(5);
    for (field, text) in FIELDS.iter().zip(times) {
        fields.push(field::parse(*field, text)?);
    }
    Ok(Entry {
        fields: fields.try_into().expect("five fields"),
        user,
        command,
        stdin,
    })
}

/// The times an `@name` stands for, as crontab(5) defines them.
fn macro_times(name: &str) -> Result<&'static str, String> {
    Ok(match name {
        "yearly" | "annually" => "0 0 1 1 *",
        "monthly" => "0 0 1 * *",
        "weekly" => "0 0 * * 0",
        "daily" | "midnight" => "0 0 * * *",
        "hourly" => "0 * * * *",
        "reboot" => {
            return Err("`@reboot` runs when the host starts, which no schedule expresses: start it from the host's own startup (a systemd unit), or run `schedkit fire <job>` there".into())
        }
        other => return Err(format!("`@{other}` is not one of cron's @hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually, @reboot")),
    })
}

fn split_word(text: &str) -> (&str, &str) {
    let text = text.trim_start();
    match text.find(char::is_whitespace) {
        Some(i) => (&text[..i], &text[i..]),
        None => (text, ""),
    }
}

/// crontab(5): an unescaped `%` ends the command; the rest is its standard input, each
/// further `%` a newline. `\%` is a literal `%`.
fn command(text: &str) -> Result<(String, Option<String>), String> {
    let mut command = String::new();
    let mut stdin: Option<String> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let target = stdin.as_mut().unwrap_or(&mut command);
        match c {
            '\\' if chars.peek() == Some(&'%') => {
                target.push('%');
                chars.next();
            }
            '%' => match stdin.as_mut() {
                Some(s) => s.push('\n'),
                None => stdin = Some(String::new()),
            },
            c => target.push(c),
        }
    }
    // Cron ends the input it gives with a newline (a `while read` loop sees its last line).
    let stdin = stdin.map(|s| s + "\n");
    Ok((command.trim_end().to_string(), stdin))
}

/// A job name from the program the command runs: past `cd ... &&`, variable assignments,
/// wrappers (`nice`, `flock FILE`, `timeout N`) and interpreters (`bash`, `python3`), the
/// program's file name without its extension, in the catalog's alphabet.
pub fn name_for(command: &str) -> String {
    let segment = command
        .split("&&")
        .map(str::trim)
        .find(|s| !s.starts_with("cd ") && *s != "cd")
        .unwrap_or(command);
    let mut words = segment
        .split(|c: char| c.is_whitespace() || c == ';' || c == '|')
        .filter(|w| !w.is_empty())
        .peekable();
    let mut program = "";
    while let Some(word) = words.next() {
        let base = word.rsplit('/').next().unwrap_or(word);
        // Assignments, options, option values (`nice -n 19`), redirections.
        let numeric = word.chars().all(|c| c.is_ascii_digit());
        if numeric || word.contains('=') || word.starts_with('-') || word.starts_with('>') {
            continue;
        }
        match base {
            "env" | "nice" | "ionice" | "nohup" | "sudo" | "exec" | "chronic" | "sh" | "bash"
            | "zsh" | "dash" | "python" | "python3" | "node" | "ruby" | "perl" | "php"
            | "run-parts" => continue,
            "flock" | "timeout" | "setlock" => {
                while words.peek().is_some_and(|w| w.starts_with('-')) {
                    words.next();
                }
                words.next();
                continue;
            }
            _ => {}
        }
        program = base;
        break;
    }
    let stem = program
        .rsplit_once('.')
        .filter(|(stem, ext)| !stem.is_empty() && ext.len() <= 4)
        .map_or(program, |(stem, _)| stem);
    let mut name = String::new();
    for c in stem.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
        } else if !name.ends_with('-') && !name.is_empty() {
            name.push('-');
        }
    }
    let name = name.trim_end_matches('-');
    let name: String = name.chars().take(40).collect();
    if name.is_empty() { "job".into() } else { name }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_program_not_its_wrappers() {
        for (command, name) in [
            ("/opt/bin/nightly-report --all", "nightly-report"),
            (
                "cd /srv/app && ./bin/export_orders.sh >> /var/log/x 2>&1",
                "export-orders",
            ),
            ("PATH=/x flock -n /tmp/l python3 /srv/etl.py", "etl"),
            ("nice -n 19 /usr/local/bin/backup", "backup"),
            ("timeout 600 curl -s https://example.com", "curl"),
            (">/dev/null", "job"),
        ] {
            assert_eq!(name_for(command), name, "{command}");
        }
    }

    #[test]
    fn percent_ends_the_command_and_feeds_its_input() {
        let e = entry("0 9 * * * mail -s \"50\\% off\" ops%Hello%World", false).unwrap();
        assert_eq!(e.command, "mail -s \"50% off\" ops");
        assert_eq!(e.stdin.as_deref(), Some("Hello\nWorld\n"));
        assert!(
            entry("0 9 * * * date +\\%F", false)
                .unwrap()
                .stdin
                .is_none()
        );
    }

    #[test]
    fn variables_are_told_from_jobs() {
        assert_eq!(
            variable("MAILTO=\"ops@x\""),
            Some(("MAILTO".into(), "ops@x".into()))
        );
        assert_eq!(
            variable("CRON_TZ = Europe/Lisbon"),
            Some(("CRON_TZ".into(), "Europe/Lisbon".into()))
        );
        assert_eq!(variable("0 * * * * X=1 cmd"), None);
        assert_eq!(variable("*/5 * * * * a=b"), None);
    }

    #[test]
    fn a_system_line_names_its_user() {
        let e = entry(
            "17 * * * * root cd / && run-parts --report /etc/cron.hourly",
            true,
        )
        .unwrap();
        assert_eq!(e.user.as_deref(), Some("root"));
        assert_eq!(e.command, "cd / && run-parts --report /etc/cron.hourly");
        assert!(
            entry("17 * * * * root", true)
                .unwrap_err()
                .contains("no command")
        );
    }
}
