//! A job's records by scheduled time, through the `by-job` index: what the accountant
//! reads to find each expected firing's run (one query per job, paged; nothing scans).

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, SecondsFormat, Utc};

use super::dynamo::{DynamoStore, StoreError, decode, unavailable};
use super::{ExecutionRecord, Pauses};

/// Records one page of the index holds at most.
const PAGE: i32 = 200;

impl DynamoStore {
    /// Every record of `job` scheduled in `[from, to]`, oldest first, and the pages read.
    pub async fn scheduled_between(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<(Vec<ExecutionRecord>, usize), StoreError> {
        // `scheduled_for` is written to the second.
        let text = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
        let mut records = Vec::new();
        let mut pages = 0;
        let mut start = None;
        loop {
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .index_name("by-job")
                .key_condition_expression("#job = :job AND #t BETWEEN :from AND :to")
                .expression_attribute_names("#job", "job")
                .expression_attribute_names("#t", "scheduled_for")
                .expression_attribute_values(":job", AttributeValue::S(job.into()))
                .expression_attribute_values(":from", AttributeValue::S(text(from)))
                .expression_attribute_values(":to", AttributeValue::S(text(to)))
                .limit(PAGE)
                .set_exclusive_start_key(start.take())
                .send();
            let out = self.timed(query).await?.map_err(unavailable)?;
            pages += 1;
            for item in out.items.unwrap_or_default() {
                let key = match item.get(super::KEY_ATTRIBUTE) {
                    Some(AttributeValue::S(k)) => k.clone(),
                    _ => String::new(),
                };
                records.push(decode(&key, item)?);
            }
            match out.last_evaluated_key.filter(|k| !k.is_empty()) {
                Some(k) => start = Some(k),
                None => return Ok((records, pages)),
            }
        }
    }

    /// The pauses kept in the same table.
    pub fn pauses(&self) -> Pauses {
        Pauses::new(self.client.clone(), &self.table)
    }
}
