//! Reading execution records, a page at a time, newest first: by job and time (index
//! `by-job`), open ones by status (the sparse index `open-by-status`), or all, and DONE
//! ones, through the sharded index `by-shard` ([`super::newest_first`]).

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use chrono::{DateTime, SecondsFormat, Utc};

use super::OpsError;
use crate::aws::{AwsError, AwsResultExt, SdkConfig};
use crate::store::{ExecutionRecord, Status};

/// Which records, and how many.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this job's records, through the `by-job` index, by scheduled time.
    pub job: Option<String>,
    /// Only records in this status: a filter on each page with `job` or for DONE (pages may
    /// come back short), else the `open-by-status` index.
    pub status: Option<Status>,
    /// With `job`, only records in one of these statuses (a filter on each page), read in
    /// one listing: a bulk cancel's selection, where a run moving between two statuses
    /// listed one after the other was in neither list. Empty: `status` decides.
    pub statuses: Vec<Status>,
    /// Scheduled at or after (by job), or updated at or after (by status or all).
    pub since: Option<DateTime<Utc>>,
    /// Upper bound, inclusive, on the same time as `since`.
    pub until: Option<DateTime<Utc>>,
    /// Records DynamoDB reads per page (its `Limit`), before any status filter.
    pub limit: i32,
    /// The token a previous page returned.
    pub page: Option<String>,
}

/// The executions table of a stage, for reading.
#[derive(Debug, Clone)]
pub struct Records {
    ddb: Client,
    table: String,
}

impl Records {
    /// Reads `table` with a DynamoDB client built from `sdk`.
    pub fn new(sdk: &SdkConfig, table: impl Into<String>) -> Records {
        Records {
            ddb: Client::new(sdk),
            table: table.into(),
        }
    }

    /// One page of records, newest first, and the token of the next page.
    pub async fn list(
        &self,
        f: &Filter,
    ) -> Result<(Vec<ExecutionRecord>, Option<String>), OpsError> {
        list(&self.ddb, &self.table, f).await.map_err(|e| match e {
            OpsError::Aws(a) => self.aws_error(a),
            e => e,
        })
    }

    /// The newest record of a job, if any.
    pub(crate) async fn last_of(&self, job: &str) -> Result<Option<ExecutionRecord>, OpsError> {
        let f = Filter {
            job: Some(job.into()),
            limit: 1,
            ..Default::default()
        };
        Ok(self.list(&f).await?.0.into_iter().next())
    }

    /// Up to `n` newest records of a job.
    pub async fn recent_of(&self, job: &str, n: i32) -> Result<Vec<ExecutionRecord>, OpsError> {
        let f = Filter {
            job: Some(job.into()),
            limit: n,
            ..Default::default()
        };
        Ok(self.list(&f).await?.0)
    }

    /// One record by key, whole.
    pub async fn get(&self, key: &str) -> Result<Option<ExecutionRecord>, OpsError> {
        crate::store::DynamoStore::new(self.ddb.clone(), &self.table)
            .get(key)
            .await
            .map_err(|e| self.store_error(e))
    }

    fn store_error(&self, e: crate::store::StoreError) -> OpsError {
        read_error(&self.table, e)
    }

    fn aws_error(&self, e: AwsError) -> OpsError {
        table_error(&self.table, e)
    }
}

/// A store's error reading `table` as an operator sees it: the table named, DynamoDB's
/// code kept, a record that does not decode named by its key.
pub(super) fn read_error(table: &str, e: crate::store::StoreError) -> OpsError {
    match e {
        crate::store::StoreError::Unavailable(answer)
        | crate::store::StoreError::Refused(answer) => table_error(
            table,
            AwsError {
                doing: format!("reading {table}"),
                // The store's text starts with DynamoDB's code (`ResourceNotFoundException: ...`).
                code: answer.split(':').next().map(str::to_owned),
                answer,
            },
        ),
        crate::store::StoreError::Malformed { key, reason } => OpsError::UndecodableRecord {
            table: table.into(),
            error: format!("`{key}`: {reason}"),
        },
    }
}

/// A table that does not exist is [`OpsError::NotFound`]: the stage is not deployed, or
/// the name is wrong; anything else stays an AWS error.
fn table_error(table: &str, e: AwsError) -> OpsError {
    if e.code.as_deref() == Some("ResourceNotFoundException") {
        OpsError::NotFound {
            kind: "table",
            name: table.into(),
        }
    } else {
        OpsError::Aws(e)
    }
}

async fn list(
    ddb: &Client,
    table: &str,
    f: &Filter,
) -> Result<(Vec<ExecutionRecord>, Option<String>), OpsError> {
    // A single index's token is its last key; the merged listing has its own.
    let start = || f.page.as_deref().map(decode_token).transpose();
    // Bounds in the format of the attribute they are compared with, as text:
    // `scheduled_for` is written to the second, `updated_at` to the millisecond.
    let bounds = |format: SecondsFormat| {
        let text = |t: &DateTime<Utc>| t.to_rfc3339_opts(format, true);
        (
            f.since.as_ref().map(text).unwrap_or_else(|| "0".into()),
            f.until.as_ref().map(text).unwrap_or_else(|| "9".into()),
        )
    };
    let (items, last) = match (&f.job, &f.status) {
        (Some(job), status) => {
            let (since, until) = bounds(SecondsFormat::Secs);
            let mut q = ddb
                .query()
                .table_name(table)
                .index_name("by-job")
                .key_condition_expression("#job = :job AND #t BETWEEN :since AND :until")
                .expression_attribute_names("#job", "job")
                .expression_attribute_names("#t", "scheduled_for")
                .expression_attribute_values(":job", AttributeValue::S(job.clone()))
                .expression_attribute_values(":since", AttributeValue::S(since))
                .expression_attribute_values(":until", AttributeValue::S(until))
                .scan_index_forward(false)
                .limit(f.limit)
                .set_exclusive_start_key(start()?);
            if !f.statuses.is_empty() {
                let names: Vec<String> = (0..f.statuses.len()).map(|i| format!(":s{i}")).collect();
                q = q
                    .filter_expression(format!("#s IN ({})", names.join(", ")))
                    .expression_attribute_names("#s", "status");
                for (name, s) in names.iter().zip(&f.statuses) {
                    q = q.expression_attribute_values(name, AttributeValue::S(s.as_str().into()));
                }
            } else if let Some(s) = status {
                q = q
                    .filter_expression("#s = :s")
                    .expression_attribute_names("#s", "status")
                    .expression_attribute_values(":s", AttributeValue::S(s.as_str().into()));
            }
            let out = q.send().await.aws(format!("querying {table} by job"))?;
            (out.items.unwrap_or_default(), out.last_evaluated_key)
        }
        (None, Some(status)) if *status != Status::Done => {
            let (since, until) = bounds(SecondsFormat::Millis);
            let out = ddb
                .query()
                .table_name(table)
                .index_name("open-by-status")
                .key_condition_expression("#s = :s AND #t BETWEEN :since AND :until")
                .expression_attribute_names("#s", "open_status")
                .expression_attribute_names("#t", "updated_at")
                .expression_attribute_values(":s", AttributeValue::S(status.as_str().into()))
                .expression_attribute_values(":since", AttributeValue::S(since))
                .expression_attribute_values(":until", AttributeValue::S(until))
                .scan_index_forward(false)
                .limit(f.limit)
                .set_exclusive_start_key(start()?)
                .send()
                .await
                .aws(format!("querying {table} by status"))?;
            (out.items.unwrap_or_default(), out.last_evaluated_key)
        }
        // Every record, or the DONE ones (which the sparse status index leaves out).
        (None, status) => {
            let (items, next) = super::newest_first::page(
                ddb,
                table,
                *status,
                bounds(SecondsFormat::Millis),
                f.limit,
                f.page.as_deref(),
            )
            .await?;
            return Ok((decode_records(table, items)?, next));
        }
    };
    Ok((
        decode_records(table, items)?,
        last.filter(|k| !k.is_empty()).map(|k| encode_token(&k)),
    ))
}

fn decode_records(
    table: &str,
    items: Vec<HashMap<String, AttributeValue>>,
) -> Result<Vec<ExecutionRecord>, OpsError> {
    items
        .into_iter()
        .map(|i| {
            serde_dynamo::from_item(i).map_err(|e| OpsError::UndecodableRecord {
                table: table.to_string(),
                error: e.to_string(),
            })
        })
        .collect()
}

/// Page tokens: the index key of the last item, as URL-safe base64 JSON (keys are strings).
fn encode_token(key: &HashMap<String, AttributeValue>) -> String {
    let plain: HashMap<&str, &str> = key
        .iter()
        .filter_map(|(k, v)| v.as_s().ok().map(|s| (k.as_str(), s.as_str())))
        .collect();
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&plain).expect("strings serialise"))
}

fn decode_token(token: &str) -> Result<HashMap<String, AttributeValue>, OpsError> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| OpsError::BadPageToken)?;
    let plain: HashMap<String, String> =
        serde_json::from_slice(&bytes).map_err(|_| OpsError::BadPageToken)?;
    Ok(plain
        .into_iter()
        .map(|(k, v)| (k, AttributeValue::S(v)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_round_trip() {
        let key: HashMap<String, AttributeValue> = [
            ("execution_key".to_string(), AttributeValue::S("a#b".into())),
            ("job".to_string(), AttributeValue::S("x".into())),
        ]
        .into();
        assert_eq!(decode_token(&encode_token(&key)).unwrap(), key);
        assert!(decode_token("!!").is_err());
    }
}
