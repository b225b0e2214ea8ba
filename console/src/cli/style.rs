//! Colour (only on a terminal, and never with NO_COLOR), confirmations before destructive
//! actions, and progress on anything long (a bar on a terminal, plain lines otherwise).

use std::io::{BufRead, IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};
use schedkit::Status;

use super::usage::UsageError;

fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// A status as printed: green DONE, red FAILED, yellow RUNNING/RETRYING, magenta PAUSED,
/// dim SKIPPED and CANCELLED.
pub fn status(s: Status) -> String {
    let code = match s {
        Status::Done => "32",
        Status::Failed => "31",
        Status::Running | Status::Retrying => "33",
        Status::Registered => "0",
        Status::Skipped | Status::Cancelled => "2",
        Status::Paused => "35",
    };
    if colour() {
        format!("\x1b[{code}m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

/// Asks before `what` unless `yes`; refuses when no one can answer.
pub fn confirm(what: &str, yes: bool) -> anyhow::Result<()> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(UsageError(format!(
            "{what}: refusing without --yes (no terminal to confirm on)"
        ))
        .into());
    }
    eprint!("{what}. Continue? Type `yes`: ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if answer.trim() == "yes" {
        Ok(())
    } else {
        Err(UsageError("not confirmed; nothing changed".into()).into())
    }
}

/// Progress of `total` steps (unknown when none).
pub struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    last: Option<u64>,
}

impl Progress {
    pub fn new(label: &str, total: Option<u64>) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total {
                Some(n) => ProgressBar::new(n),
                None => ProgressBar::new_spinner(),
            };
            bar.set_style(
                ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_message(label.to_string());
            bar
        });
        Progress {
            bar,
            label: label.into(),
            last: None,
        }
    }

    pub fn set(&mut self, done: u64, total: Option<u64>) {
        match &self.bar {
            Some(bar) => {
                if let Some(t) = total {
                    bar.set_length(t);
                }
                bar.set_position(done);
            }
            None if self.last != Some(done) => {
                let total = total.map(|t| format!("/{t}")).unwrap_or_default();
                eprintln!("{}: {done}{total}", self.label);
                self.last = Some(done);
            }
            None => {}
        }
    }

    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish();
        }
    }
}
