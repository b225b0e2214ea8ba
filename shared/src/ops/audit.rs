//! The audit trail: one JSON line per action that changes state (who, what, when),
//! appended to `SCHEDKIT_AUDIT_LOG` (default `~/.schedkit/audit.jsonl`).

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

/// Appends the line for one action.
pub async fn record(sdk: &SdkConfig, action: &str, details: Value) -> Result<(), OpsError> {
    let line = json!({
        "when": chrono::Utc::now().to_rfc3339(),
        "who": who(sdk).await,
        "what": action,
        "details": details,
    });
    writeln!(open()?, "{line}").map_err(|e| audit_error(&path(), e))
}
