//! What an import made of a crontab: its jobs, the lines it refused, its notes.

use std::collections::BTreeMap;

/// What the import made of a crontab.
#[derive(Debug, Clone, Default)]
pub struct Imported {
    /// One job per line translated exactly, in the crontab's order.
    pub jobs: Vec<ImportedJob>,
    /// Every line that could not be, with why.
    pub refused: Vec<Refused>,
    /// What was read but has no place in a job (`MAILTO`), once each.
    pub notes: Vec<String>,
}

/// A crontab line as a catalog job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedJob {
    /// A name derived from the command (unique in the import).
    pub name: String,
    /// 1-based line number in the crontab.
    pub line: usize,
    /// The line as written: the job's description.
    pub source: String,
    /// The comment lines right above it, if any.
    pub comment: Option<String>,
    /// EventBridge's equivalent (`cron(30 2 ? * MON-FRI *)`).
    pub expression: String,
    /// The zone it fires in.
    pub timezone: String,
    /// The command, `%` and `\%` resolved.
    pub command: String,
    /// What cron gave its standard input (the text after the first unescaped `%`).
    pub stdin: Option<String>,
    /// The variables set above the line, as cron would have given them to the command.
    pub env: BTreeMap<String, String>,
    /// The user a system crontab ran it as.
    pub user: Option<String>,
    /// The shell a `SHELL=` line above it set (cron's default is `/bin/sh`).
    pub shell: Option<String>,
}

/// A line the import did not translate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// 1-based line number.
    pub line: usize,
    /// The line as written.
    pub source: String,
    /// Why, and what to do instead.
    pub reason: String,
}
