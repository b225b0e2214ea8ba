//! The audit trail: two entries per action that changes state, in the stage itself (the
//! executions table's own key space, see [`crate::store::AuditEntry`]), so that every
//! operator's actions, from any machine, and the worker's own pauses are in one place
//! (`schedkit audit` reads them): one when it begins (who: the AWS identity; what; when;
//! the arguments) and one when it ends, saying whether it finished and what it did, also
//! when it stopped half-way (a redrive whose lanes moved some letters before one failed, a
//! rerun that recorded its run but could not start its execution, a pause that recorded
//! the pause but could not disable the schedule). The two share an `id`. An action whose
//! begin entry cannot be written does not happen.
//!
//! The front end says which stage the trail is in ([`to_stage`]). `SCHEDKIT_AUDIT_LOG`
//! names a file that gets a copy of each entry as a JSON line (and is the trail itself for
//! a program that names no stage: `~/.schedkit/audit.jsonl` by default).

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::{Value, json};

use super::OpsError;
use crate::aws::SdkConfig;
use crate::store::{AuditEntry, AuditFilter, DynamoStore};

/// The stage whose executions table holds the trail, once the front end has said.
static STAGE: OnceLock<DynamoStore> = OnceLock::new();

/// Keeps the trail in the stage whose executions table is `table` (the first call wins).
pub fn to_stage(sdk: &SdkConfig, table: &str) {
    let _ = STAGE.set(DynamoStore::new(aws_sdk_dynamodb::Client::new(sdk), table));
}

/// Keeps the trail in the default stage (one no flag named) whose executions table is
/// `table`, when that stage is deployed: a program working on resources named one by one
/// without one keeps its trail in the file. One `GetItem` tells (a table that does not
/// exist); any other answer keeps the trail in the stage, where its begin entry then says
/// what is wrong before anything happens.
pub async fn to_default_stage(sdk: &SdkConfig, table: &str) {
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let probe = client
        .get_item()
        .table_name(table)
        .key(
            crate::store::KEY_ATTRIBUTE,
            aws_sdk_dynamodb::types::AttributeValue::S(format!(
                "{}audit/probe",
                crate::store::INTERNAL_PREFIX
            )),
        )
        .send()
        .await;
    let missing = probe.as_ref().err().is_some_and(|e| {
        e.as_service_error()
            .is_some_and(|e| e.is_resource_not_found_exception())
    });
    if !missing {
        let _ = STAGE.set(DynamoStore::new(client, table));
    }
}

/// The file that gets a copy of the entries, if any: `SCHEDKIT_AUDIT_LOG`; without a stage,
/// `~/.schedkit/audit.jsonl` (then the trail itself).
pub fn path() -> Option<PathBuf> {
    match std::env::var_os("SCHEDKIT_AUDIT_LOG") {
        Some(p) => Some(PathBuf::from(p)),
        None if STAGE.get().is_some() => None,
        None => {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(std::env::temp_dir);
            Some(home.join(".schedkit").join("audit.jsonl"))
        }
    }
}

/// The entries of the stage's trail from `since` to `until`, newest first (the newest
/// `limit`).
pub async fn read(
    sdk: &SdkConfig,
    table: &str,
    since: chrono::DateTime<chrono::Utc>,
    until: chrono::DateTime<chrono::Utc>,
    filter: &AuditFilter,
    limit: usize,
) -> Result<Vec<AuditEntry>, OpsError> {
    DynamoStore::new(aws_sdk_dynamodb::Client::new(sdk), table)
        .audit_entries(since, until, filter, limit)
        .await
        .map_err(|e| OpsError::AuditStage {
            table: table.into(),
            error: e.to_string(),
        })
}

/// Who runs the console: the AWS identity (STS). Only a trail kept in a file may fall
/// back to the local user (`user@host (no AWS identity)`): a stage's trail names the AWS
/// identity or nothing is done, or anyone who can keep STS out of reach (a wrong
/// `AWS_ENDPOINT_URL_STS`) could act under any name.
async fn who(sdk: &SdkConfig) -> Result<String, OpsError> {
    let error = match aws_sdk_sts::Client::new(sdk)
        .get_caller_identity()
        .send()
        .await
    {
        Ok(id) => return Ok(id.arn.unwrap_or_default()),
        Err(e) => crate::aws::describe(&e),
    };
    match STAGE.get() {
        Some(stage) => Err(OpsError::AuditStage {
            table: stage.table().to_string(),
            error: format!("who acts is not known: STS GetCallerIdentity failed: {error}"),
        }),
        None => Ok(format!(
            "{}@{} (no AWS identity)",
            std::env::var("USER").unwrap_or_else(|_| "unknown".into()),
            std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into())
        )),
    }
}

/// Checks that the audit trail's file copy, if any, can be written. Commands that change
/// state call it before they ask for confirmation; the stage's trail is checked by the
/// begin entry itself, written before the action.
pub fn ensure_writable() -> Result<(), OpsError> {
    match path() {
        Some(path) => open(&path).map(drop),
        None => Ok(()),
    }
}

fn open(path: &std::path::Path) -> Result<std::fs::File, OpsError> {
    let opened = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        });
    opened.map_err(|e| audit_error(path, e))
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
        who: who(sdk).await?,
        what: action.to_string(),
        details,
    };
    audited.write(json!({ "phase": "begin" })).await?;
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
    pub async fn end<T: serde::Serialize, E: std::fmt::Display>(
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
        if let Err(e) = self.write(end).await {
            eprintln!(
                "warning: the audit trail's end line of `{}` ({}) was not written: {e}",
                self.what, self.id
            );
        }
    }

    async fn write(&self, phase: Value) -> Result<(), OpsError> {
        let mut line = json!({
            "id": self.id,
            "when": crate::store::timestamp(chrono::Utc::now()),
            "who": self.who,
            "what": self.what,
            "details": self.details,
        });
        if let (Some(line), Value::Object(phase)) = (line.as_object_mut(), phase) {
            line.extend(phase);
        }
        if let Some(stage) = STAGE.get() {
            let entry: AuditEntry =
                serde_json::from_value(line.clone()).expect("an entry of its own fields");
            stage
                .put_audit(&entry)
                .await
                .map_err(|e| OpsError::AuditStage {
                    table: stage.table().to_string(),
                    error: e.to_string(),
                })?;
        }
        match path() {
            Some(path) => writeln!(open(&path)?, "{line}").map_err(|e| audit_error(&path, e)),
            None => Ok(()),
        }
    }
}
