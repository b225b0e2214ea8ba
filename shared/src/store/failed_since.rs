//! The jobs whose runs ended FAILED lately, through the sparse `open-by-status` index:
//! what the accountant counts into the failure storm (one query, paged; only the job names
//! come back, however many records failed).

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, SecondsFormat, Utc};

use super::Status;
use super::dynamo::{DynamoStore, StoreError, unavailable};

/// Records one page of the index holds at most.
const PAGE: i32 = 500;

impl DynamoStore {
    /// The jobs (and chains) of every record that is FAILED now and was last written after
    /// `since`, and the pages read.
    pub async fn jobs_failed_since(
        &self,
        since: DateTime<Utc>,
    ) -> Result<(BTreeSet<String>, usize), StoreError> {
        let mut jobs = BTreeSet::new();
        let mut pages = 0;
        let mut start = None;
        loop {
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .index_name("open-by-status")
                .key_condition_expression("#s = :s AND #t > :since")
                .expression_attribute_names("#s", "open_status")
                .expression_attribute_names("#t", "updated_at")
                .expression_attribute_names("#job", "job")
                .expression_attribute_values(
                    ":s",
                    AttributeValue::S(Status::Failed.as_str().into()),
                )
                .expression_attribute_values(
                    ":since",
                    AttributeValue::S(since.to_rfc3339_opts(SecondsFormat::Millis, true)),
                )
                .projection_expression("#job")
                .limit(PAGE)
                .set_exclusive_start_key(start.take())
                .send();
            let out = self.timed(query).await?.map_err(unavailable)?;
            pages += 1;
            for item in out.items.unwrap_or_default() {
                if let Some(AttributeValue::S(job)) = item.get("job") {
                    jobs.insert(job.clone());
                }
            }
            match out.last_evaluated_key.filter(|k| !k.is_empty()) {
                Some(k) => start = Some(k),
                None => return Ok((jobs, pages)),
            }
        }
    }
}
