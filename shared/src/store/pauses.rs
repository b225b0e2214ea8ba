//! Why a job is paused: who paused it, when and why, kept beside its records (item
//! `pause#<job>` in the executions table, invisible to every index). The pause itself is
//! the schedule's DISABLED state in EventBridge Scheduler (`schedkit::trigger::pause`);
//! this record is what `status` and `jobs` show, and what keeps sync from enabling a
//! paused schedule again.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};

use super::{KEY_ATTRIBUTE, StoreError};

/// A job's pause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseRecord {
    /// The job.
    pub job: String,
    /// Who paused it: the operator's AWS identity, or `worker` for an automatic pause.
    pub by: String,
    /// When, RFC 3339 in UTC.
    pub at: String,
    /// Why, as the operator (or the worker) said it.
    pub reason: String,
}

/// The pause records of a stage's executions table.
#[derive(Debug, Clone)]
pub struct Pauses {
    ddb: Client,
    table: String,
}

fn key(job: &str) -> AttributeValue {
    AttributeValue::S(format!("pause#{job}"))
}

/// A stored pause (its key left out) as a record.
fn decode(
    job: &str,
    mut item: std::collections::HashMap<String, AttributeValue>,
) -> Result<PauseRecord, StoreError> {
    item.remove(KEY_ATTRIBUTE);
    serde_dynamo::from_item(item).map_err(|e| StoreError::Malformed {
        key: format!("pause#{job}"),
        reason: e.to_string(),
    })
}

fn failed(what: String, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("{what}: {e}"))
}

impl Pauses {
    /// The pauses kept in `table`, with a client built from `sdk`.
    pub fn for_table(sdk: &crate::aws::SdkConfig, table: impl Into<String>) -> Self {
        Pauses::new(Client::new(sdk), table)
    }

    /// The pauses kept in `table`.
    pub fn new(ddb: Client, table: impl Into<String>) -> Self {
        Pauses {
            ddb,
            table: table.into(),
        }
    }

    /// The pause of `job`, if it is paused. A table that does not exist (a schedule group
    /// of no deployed stage) holds no pause.
    pub async fn get(&self, job: &str) -> Result<Option<PauseRecord>, StoreError> {
        let out = match self
            .ddb
            .get_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, key(job))
            .consistent_read(true)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                return Ok(None);
            }
            Err(e) => {
                return Err(failed(
                    format!("reading the pause of {job}"),
                    crate::aws::describe(&e),
                ));
            }
        };
        out.item.map(|item| decode(job, item)).transpose()
    }

    /// The pauses of `jobs`, by job (paused ones only).
    pub async fn of<'a>(
        &self,
        jobs: impl IntoIterator<Item = &'a str>,
    ) -> Result<BTreeMap<String, PauseRecord>, StoreError> {
        let mut out = BTreeMap::new();
        for job in jobs {
            if let Some(p) = self.get(job).await? {
                out.insert(job.to_string(), p);
            }
        }
        Ok(out)
    }

    /// Records a pause (replacing an earlier one of the job).
    pub async fn put(&self, pause: &PauseRecord) -> Result<(), StoreError> {
        let mut item: std::collections::HashMap<String, AttributeValue> =
            serde_dynamo::to_item(pause).expect("a pause serialises");
        item.insert(KEY_ATTRIBUTE.into(), key(&pause.job));
        self.ddb
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| {
                failed(
                    format!("recording the pause of {}", pause.job),
                    crate::aws::describe(&e),
                )
            })?;
        Ok(())
    }

    /// Forgets the pause of `job` and its run of failures (a resumed job gets its full
    /// `pause_after_failures` again); returns the pause, if there was one.
    pub async fn remove(&self, job: &str) -> Result<Option<PauseRecord>, StoreError> {
        self.ddb
            .delete_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, AttributeValue::S(super::failures_key(job)))
            .send()
            .await
            .map_err(|e| {
                failed(
                    format!("forgetting the failures of {job}"),
                    crate::aws::describe(&e),
                )
            })?;
        let out = self
            .ddb
            .delete_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, key(job))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| {
                failed(
                    format!("removing the pause of {job}"),
                    crate::aws::describe(&e),
                )
            })?;
        out.attributes
            .filter(|a| !a.is_empty())
            .map(|item| decode(job, item))
            .transpose()
    }
}
