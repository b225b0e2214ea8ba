//! The audit trail: two JSON lines per action that changes state, appended to
//! `SCHEDKIT_AUDIT_LOG` (default `~/.schedkit/audit.jsonl`): one when it begins (who, what,
//! when, the arguments) and one when it ends, saying whether it finished and what it did,
//! also when it stopped half-way (a redrive whose lanes moved some letters before one
//! failed, a rerun that recorded its run but could not start its execution, a pause that
//! recorded the pause but could not disable the schedule). The two share an `id`. An action
//! whose begin line cannot be written does not happen.

use std::io::Write;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::OpsError;
use crate::aws::SdkConfig;

/// Where the audit lines go.
pub fn path() -> PathBuf {
    match std::env::var_os("SCHEDKIT_AUDIT_LOG") {
        Some(p) => PathBuf::from(p),
        None => {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(std::env::temp_dir);
            home.join(".schedkit").join("audit.jsonl")
        }
    }
}

/// Who runs the console: the AWS identity (STS), else the local user.
pub async fn who(sdk: &SdkConfig) -> String {
    match aws_sdk_sts::Client::new(sdk)
        .get_caller_identity()
        .send()
        .await
    {
        Ok(id) => id.arn.unwrap_or_default(),
        Err(_) => format!(
            "{}@{} (no AWS identity)",
            std::env::var("USER").unwrap_or_else(|_| "unknown".into()),
            std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into())
        ),
    }
}

/// Checks that the audit trail can be written. Commands that change state call it before
/// they act: an action must not happen if its audit line cannot be kept.
pub fn ensure_writable() -> Result<(), OpsError> {
    open().map(drop)
}

fn open() -> Result<std::fs::File, OpsError> {
    let path = path();
    let opened = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
        });
    opened.map_err(|e| audit_error(&path, e))
}

fn audit_error(path: &std::path::Path, e: std::io::Error) -> OpsError {
    OpsError::Audit {
        path: path.display().to_string(),
        error: e.to_string(),
    }
}

/// An action whose begin line is written: [`Audited::end`] writes its end.
#[derive(Debug)]
#[must_use = "an audited action ends with `end`, which writes what it did"]
pub struct Audited {
    id: String,
    who: String,
    what: String,
    details: Value,
}

/// Writes the begin line of `action` with its `details` (the arguments, the stage).
pub async fn begin(sdk: &SdkConfig, action: &str, details: Value) -> Result<Audited, OpsError> {
    let audited = Audited {
        id: uuid::Uuid::new_v4().to_string(),
        who: who(sdk).await,
        what: action.to_string(),
        details,
    };
    audited.write(json!({ "phase": "begin" }))?;
    Ok(audited)
}

impl Audited {
    /// Who acts: the identity the begin line names.
    pub fn who(&self) -> &str {
        &self.who
    }

    /// Writes the end line: what `result` says (the action's own summary when it finished,
    /// its error and `done`, what it had changed before it stopped, when it did not). The
    /// action has happened by now, whatever became of it: a line that cannot be written is
    /// said on stderr, and the action's own result stands.
    pub fn end<T: serde::Serialize, E: std::fmt::Display>(
        self,
        result: &Result<T, E>,
        done: Option<&str>,
    ) {
        let end = match result {
            Ok(summary) => json!({
                "phase": "end",
                "finished": true,
                "result": serde_json::to_value(summary).unwrap_or(Value::Null),
            }),
            Err(e) => json!({
                "phase": "end",
                "finished": false,
                "error": e.to_string(),
                "done": done.unwrap_or("nothing"),
            }),
        };
        if let Err(e) = self.write(end) {
            eprintln!(
                "warning: the audit trail's end line of `{}` ({}) was not written: {e}",
                self.what, self.id
            );
        }
    }

    fn write(&self, phase: Value) -> Result<(), OpsError> {
        let mut line = json!({
            "id": self.id,
            "when": chrono::Utc::now().to_rfc3339(),
            "who": self.who,
            "what": self.what,
            "details": self.details,
        });
        if let (Some(line), Value::Object(phase)) = (line.as_object_mut(), phase) {
            line.extend(phase);
        }
        writeln!(open()?, "{line}").map_err(|e| audit_error(&path(), e))
    }
}
