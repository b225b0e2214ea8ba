//! The execution store on DynamoDB: one conditional write per transition.
//!
//! Every write returns the item as it was (`ALL_OLD`), on success and, through
//! `ReturnValuesOnConditionCheckFailure`, on refusal too: a claim costs one request whatever
//! it finds, a successful run two (claim, complete), a duplicate one.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use chrono::{DateTime, Utc};

use crate::effects::table_of;

use super::attributes::{n, record_item, s};
use super::condition::Condition;
use super::conditions;
use super::list_shard;
use super::record::{
    ClaimOutcome, ClaimRequest, ExecutionRecord, Finish, Status, cap_snapshot, claimed_record,
    classify_refusal, finished_record, lease_until, timestamp,
};

/// The table's partition key attribute.
pub const KEY_ATTRIBUTE: &str = "execution_key";
/// The table's TTL attribute (epoch seconds).
pub const TTL_ATTRIBUTE: &str = "expires_at";

/// The store could not do its job; nothing was changed by this call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// Network, throttling, a missing table: worth trying again later.
    #[error("execution store unavailable: {0}")]
    Unavailable(String),
    /// DynamoDB refuses the request as made (a validation error, access denied): the same
    /// request can never pass, so retrying it only delays the dead letter. Holds its answer.
    #[error("execution store refused the request: {0}")]
    Refused(String),
    /// An item that does not decode as an execution record.
    #[error("execution record `{key}` is malformed: {reason}")]
    Malformed {
        /// The execution key of the item.
        key: String,
        /// What did not decode, as serde says it.
        reason: String,
    },
}

impl StoreError {
    /// True when trying the same request again cannot help (refused, or a record that no
    /// longer decodes): the message goes to the DLQ with this error as its reason.
    pub fn is_permanent(&self) -> bool {
        matches!(self, StoreError::Refused(_) | StoreError::Malformed { .. })
    }
}

/// Why an owner's write (heartbeat, complete, retry, fail) did not happen.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TransitionError {
    /// Fenced: the run is no longer ours (our lease expired and someone reclaimed it, or
    /// it was finished). The record is left as the new owner wrote it.
    #[error("lease lost: the run now belongs to {}", current.as_ref().and_then(|r| r.owner.as_deref()).unwrap_or("nobody"))]
    LeaseLost {
        /// The record as the refusal found it; None when the item is gone (TTL, by hand).
        current: Option<Box<ExecutionRecord>>,
    },
    /// The store itself failed (unreachable, or a malformed item), not the fence.
    #[error(transparent)]
    Store(#[from] StoreError),
}

const CLAIM_UPDATE: &str = "SET #status = :running, #open_status = :running, \
     #list_shard = if_not_exists(#list_shard, :shard), #attempt = if_not_exists(#attempt, :zero) + :one, \
     #attempt_base = if_not_exists(#attempt_base, :zero), #owner = :owner, #lease_expires_at = :lease, \
     #started_at = :now, #updated_at = :now, #created_at = if_not_exists(#created_at, :now), \
     #job = :job, #scheduled_for = :scheduled_for, #payload_hash = :hash, \
     #input = if_not_exists(#input, :input), #message_id = :message_id, #expires_at = :ttl, \
     #history = if_not_exists(#history, :empty) \
     REMOVE #finished_at, #duration_ms";

/// Why a commit with effects did not happen. Nothing of it was applied in any case.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CommitError {
    /// Fenced, or the lease ran out before the commit: the run is not ours to finish.
    #[error("lease lost before the commit: the run now belongs to {}", current.as_ref().and_then(|r| r.owner.as_deref()).unwrap_or("nobody"))]
    LeaseLost {
        /// The record as the refusal found it; None when the item is gone.
        current: Option<Box<ExecutionRecord>>,
    },
    /// One of the job's own conditions (on an effect, or a condition check) did not hold.
    #[error("effect {index} (table {table}) was refused: {reason}")]
    EffectRefused {
        /// Its position in the order the job handed its effects, from 0.
        index: usize,
        /// The table it writes to.
        table: String,
        /// DynamoDB's message.
        reason: String,
    },
    /// DynamoDB refuses the effects as written (a bad expression, two writes to one item, a
    /// table that does not exist): the same commit can never pass.
    #[error("the effects cannot be committed: {0}")]
    Invalid(String),
    /// DynamoDB unreachable, throttled, or a conflicting transaction: try again later.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// DynamoDB-backed execution store.
#[derive(Clone, Debug)]
pub struct DynamoStore {
    pub(super) client: Client,
    pub(super) table: String,
    call_timeout: Duration,
}

/// How long one store call may take, the SDK's own retries included. Shorter than any sensible heartbeat interval: a call
/// that hangs must not outlive the lease it is meant to keep (heartbeats are bounded by
/// their interval as well).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5);

impl DynamoStore {
    /// A store on the executions table `table` (the template's `schedkit-<stage>-executions`).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoStore {
            client,
            table: table.into(),
            call_timeout: DEFAULT_CALL_TIMEOUT,
        }
    }

    /// Bounds one call: no answer within the call timeout is an unavailable store.
    ///
    /// The call is boxed: an SDK request's future is tens of kilobytes, and inline it would
    /// make every future that awaits a store call as large, copied whole each time a task
    /// holding one is spawned (7 % of the worker's instructions per job, in the profile).
    pub(super) async fn timed<T>(&self, call: impl Future<Output = T>) -> Result<T, StoreError> {
        tokio::time::timeout(self.call_timeout, Box::pin(call))
            .await
            .map_err(|_| {
                StoreError::Unavailable(format!(
                    "no answer from DynamoDB within {} ms",
                    self.call_timeout.as_millis()
                ))
            })
    }

    /// The executions table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The client it was built with, to reach other tables with the same configuration.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Claims the run named by `req.key` (one `UpdateItem`).
    pub async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, StoreError> {
        let result = self
            .update(&req.key, CLAIM_UPDATE, conditions::claim(req))
            .expression_attribute_values(":running", s(Status::Running.as_str()))
            .expression_attribute_values(":shard", s(&list_shard(&req.key)))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":owner", s(&req.owner))
            .expression_attribute_values(":lease", n(lease_until(req.now, req.lease)))
            .expression_attribute_values(":now", s(&timestamp(req.now)))
            .expression_attribute_values(":job", s(&req.job))
            .expression_attribute_values(":scheduled_for", s(&req.scheduled_for))
            .expression_attribute_values(":hash", s(&req.payload_hash))
            .expression_attribute_values(":input", s(&cap_snapshot(&req.input)))
            .expression_attribute_values(":message_id", s(req.message_id.as_deref().unwrap_or("")))
            .expression_attribute_values(
                ":ttl",
                n(req.now.timestamp() + req.retention.as_secs() as i64),
            )
            .expression_attribute_values(":empty", AttributeValue::L(Vec::new()));
        let result = self.timed(result.send()).await?;
        match result {
            Ok(out) => {
                let before = match out.attributes {
                    Some(item) if !item.is_empty() => Some(decode(&req.key, item)?),
                    _ => None,
                };
                Ok(ClaimOutcome::Claimed {
                    record: claimed_record(before.clone(), req),
                    before: before.map(Box::new),
                })
            }
            Err(err) => match refused_item(&err) {
                Some(item) => Ok(classify_refusal(decode(&req.key, item)?, req)),
                None => Err(unavailable(err)),
            },
        }
    }

    /// Extends the owner's lease to `now + lease` (one `UpdateItem`).
    pub async fn heartbeat(
        &self,
        key: &str,
        owner: &str,
        now: DateTime<Utc>,
        lease: std::time::Duration,
    ) -> Result<(), TransitionError> {
        let result = self
            .update(
                key,
                "SET #lease_expires_at = :lease, #updated_at = :now",
                conditions::owner(owner),
            )
            .expression_attribute_values(":lease", n(lease_until(now, lease)))
            .expression_attribute_values(":now", s(&timestamp(now)))
            .send();
        let result = self.timed(result).await?;
        self.fenced(key, result.map(|_| ()))
    }

    /// Ends the owner's attempt as DONE, RETRYING or FAILED (one `UpdateItem`), and returns
    /// the record as written.
    pub async fn finish(
        &self,
        claimed: &ExecutionRecord,
        finish: &Finish,
        now: DateTime<Utc>,
    ) -> Result<ExecutionRecord, TransitionError> {
        let (after, write) = FinishWrite::of(claimed, finish, now);
        let owner = claimed.owner.as_deref().unwrap_or_default();
        let mut req = self.update(
            &claimed.execution_key,
            &write.update,
            conditions::owner(owner),
        );
        for (name, value) in write.values {
            req = req.expression_attribute_values(name, value);
        }
        let result = self.timed(req.send()).await?;
        match self.fenced(&claimed.execution_key, result.map(|_| ())) {
            Ok(()) => Ok(after),
            // Applied by an earlier try whose answer was lost; the SDK's retry met it.
            Err(TransitionError::LeaseLost {
                current: Some(current),
            }) if current.holds_outcome(&after) => Ok(after),
            Err(e) => Err(e),
        }
    }

    /// Ends the owner's attempt as DONE together with the job's `effects`, in one
    /// `TransactWriteItems`: the record's transition (conditioned on the owner token and on
    /// the lease being live at `now`) and every effect, applied all or none. A retry of the
    /// same commit (the SDK's, after a lost answer) is idempotent through its request token.
    pub async fn commit(
        &self,
        claimed: &ExecutionRecord,
        result: serde_json::Value,
        now: DateTime<Utc>,
        effects: Vec<TransactWriteItem>,
    ) -> Result<ExecutionRecord, CommitError> {
        let (after, write) = FinishWrite::of(claimed, &Finish::Succeeded { result }, now);
        let condition = conditions::commit(claimed.owner.as_deref().unwrap_or_default(), now);
        let mut update = Update::builder()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, s(&claimed.execution_key))
            .update_expression(&write.update)
            .condition_expression(condition.expression())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .set_expression_attribute_names(Some(write.names(&condition)));
        for (name, value) in condition.values() {
            update = update.expression_attribute_values(name, value.clone());
        }
        for (name, value) in write.values {
            update = update.expression_attribute_values(name, value);
        }
        let record = TransactWriteItem::builder()
            .update(update.build().expect("table, key and expressions are set"))
            .build();
        let owner = claimed.owner.as_deref().unwrap_or_default();
        let tables: Vec<String> = effects.iter().map(|e| table_of(e).to_string()).collect();
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(std::iter::once(record).chain(effects).collect()))
            .client_request_token(request_token(&claimed.execution_key, owner))
            .send();
        let result = self.timed(result).await?;
        let err = match result {
            Ok(_) => return Ok(after),
            Err(err) => err,
        };
        let Some(service) = err.as_service_error() else {
            return Err(CommitError::Store(unavailable(err)));
        };
        match service {
            TransactWriteItemsError::TransactionCanceledException(e) => {
                let reasons = e.cancellation_reasons();
                let refused = |r: &CancellationReason| r.code() == Some("ConditionalCheckFailed");
                if let Some(record) = reasons.first().filter(|r| refused(r)) {
                    let current = match record.item().filter(|i| !i.is_empty()) {
                        Some(item) => Some(Box::new(decode(&claimed.execution_key, item.clone())?)),
                        None => None,
                    };
                    // Our own commit, applied by an earlier try whose answer was lost (where
                    // the request token did not already answer for it).
                    if current.as_ref().is_some_and(|c| {
                        c.status == Status::Done && c.owner.as_deref() == Some(owner)
                    }) {
                        return Ok(after);
                    }
                    return Err(CommitError::LeaseLost { current });
                }
                if let Some((i, r)) = reasons.iter().enumerate().skip(1).find(|(_, r)| refused(r)) {
                    return Err(CommitError::EffectRefused {
                        index: i - 1,
                        table: tables[i - 1].clone(),
                        reason: r.message().unwrap_or("its condition failed").to_string(),
                    });
                }
                let invalid = reasons.iter().find(|r| r.code() == Some("ValidationError"));
                match invalid {
                    Some(r) => Err(CommitError::Invalid(
                        r.message().unwrap_or("an effect is invalid").to_string(),
                    )),
                    // TransactionConflict, ThrottlingError, ProvisionedThroughputExceeded: the
                    // next attempt may well pass.
                    None => Err(CommitError::Store(unavailable(err))),
                }
            }
            TransactWriteItemsError::ResourceNotFoundException(_) => {
                Err(CommitError::Invalid(crate::aws::describe(&err)))
            }
            // The same attempt's commit with other contents: a bug, never a passing retry.
            other
                if matches!(
                    other.code(),
                    Some("ValidationException" | "IdempotentParameterMismatchException")
                ) =>
            {
                Err(CommitError::Invalid(crate::aws::describe(&err)))
            }
            _ => Err(CommitError::Store(unavailable(err))),
        }
    }

    /// Reads one record (strongly consistent). Used by tools and tests, never on the hot path.
    pub async fn get(&self, key: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, s(key))
            .consistent_read(true)
            .send();
        let out = self.timed(out).await?.map_err(unavailable)?;
        out.item.map(|item| decode(key, item)).transpose()
    }

    /// A conditional `UpdateItem` of `key` that returns the item as it was: the
    /// condition's expression, names and values, and the update's names (`#x` for the
    /// attribute `x`); the caller binds the update's values.
    pub(super) fn update(
        &self,
        key: &str,
        update: &str,
        condition: impl Into<Condition>,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        let condition = condition.into();
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, s(key))
            .update_expression(update)
            .condition_expression(condition.expression())
            .return_values(ReturnValue::AllOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        // An update's placeholder is the attribute of its name, unless the condition binds
        // it (a binding only the update used was once sent as the placeholder's text, and
        // the entry written under the key `next`, while memory wrote it as bound).
        for name in placeholder_names(update) {
            let placeholder = format!("#{name}");
            let attribute = condition.bound(&placeholder).unwrap_or(name).to_string();
            req = req.expression_attribute_names(placeholder, attribute);
        }
        for (placeholder, attribute) in condition.names() {
            req = req.expression_attribute_names(placeholder, attribute);
        }
        for (placeholder, value) in condition.values() {
            req = req.expression_attribute_values(placeholder, value.clone());
        }
        req
    }

    fn fenced<T>(
        &self,
        key: &str,
        result: Result<T, SdkError<UpdateItemError>>,
    ) -> Result<T, TransitionError> {
        match result {
            Ok(v) => Ok(v),
            Err(err) => Err(match refusal(key, err) {
                Ok(current) => TransitionError::LeaseLost {
                    current: current.map(Box::new),
                },
                Err(e) => TransitionError::Store(e),
            }),
        }
    }
}

/// The write that ends an attempt, as an update expression with its values: the same for
/// a plain `UpdateItem` and for the record's part of a commit.
struct FinishWrite {
    update: String,
    values: Vec<(&'static str, AttributeValue)>,
}

impl FinishWrite {
    /// The record after `finish`, and the write that makes it so.
    fn of(
        claimed: &ExecutionRecord,
        finish: &Finish,
        now: DateTime<Utc>,
    ) -> (ExecutionRecord, Self) {
        let owner = claimed.owner.as_deref().unwrap_or_default();
        let after = finished_record(claimed, finish, now);
        let mut set = vec![
            "#status = :status",
            "#updated_at = :updated_at",
            "#duration_ms = :duration_ms",
            "#history = :history",
            "#attempt_base = :attempt_base",
        ];
        let history = serde_dynamo::to_attribute_value(&after.history)
            .expect("attempt history always serialises");
        let mut values = vec![
            (":running", s(Status::Running.as_str())),
            (":owner", s(owner)),
            (":status", s(after.status.as_str())),
            (":updated_at", s(&after.updated_at)),
            (":duration_ms", n(after.duration_ms.unwrap_or(0) as i64)),
            (":history", history),
            (":attempt_base", n(after.attempt_base as i64)),
        ];
        let optional = [
            // The attempt's own start, after its admission (its limits may have held it
            // back after the claim): what its duration and the records' timelines read.
            (
                "#started_at = :started_at",
                ":started_at",
                &after.started_at,
            ),
            (
                "#finished_at = :finished_at",
                ":finished_at",
                &after.finished_at,
            ),
            ("#result = :result", ":result", &after.result),
            (
                "#last_error = :last_error",
                ":last_error",
                &after.last_error,
            ),
        ];
        for (clause, name, value) in optional {
            if let Some(v) = value {
                set.push(clause);
                values.push((name, s(v)));
            }
        }
        // `open_status` exists only while a record is not DONE: the `open-by-status` index
        // stays small and never gathers every DONE record under one partition key.
        let update = if after.status == Status::Done {
            format!(
                "SET {} REMOVE #lease_expires_at, #open_status",
                set.join(", ")
            )
        } else {
            set.push("#open_status = :status");
            format!("SET {} REMOVE #lease_expires_at", set.join(", "))
        };
        (after, FinishWrite { update, values })
    }

    /// The `#name` placeholders of the update and of `condition`.
    fn names(&self, condition: &Condition) -> HashMap<String, String> {
        placeholder_names(&self.update)
            .map(|name| (format!("#{name}"), name.to_string()))
            .chain(condition.names())
            .collect()
    }
}

/// The idempotency token of an attempt's commit (1-36 characters), from the run's key and
/// the attempt's owner token: a retry of the same commit within DynamoDB's ten minutes is
/// answered as applied, not applied twice.
fn request_token(key: &str, owner: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("commit\n{key}\n{owner}").as_bytes());
    hex::encode(digest)[..36].to_string()
}

/// The `#name` placeholders of an expression; each stands for the attribute `name`.
/// Every attribute goes through a placeholder, so none can collide with DynamoDB's long
/// list of reserved words (`status`, `owner`, `input`, `result` are all on it).
fn placeholder_names(expr: &str) -> impl Iterator<Item = &str> {
    expr.split('#').skip(1).map(|rest| {
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        &rest[..end]
    })
}

pub(super) fn refused_item(
    err: &SdkError<UpdateItemError>,
) -> Option<HashMap<String, AttributeValue>> {
    match err.as_service_error() {
        Some(UpdateItemError::ConditionalCheckFailedException(e)) => {
            e.item().filter(|i| !i.is_empty()).cloned()
        }
        _ => None,
    }
}

/// A conditional `UpdateItem`'s error read: refused on the record as it was (None: there
/// was no item, deleted by hand or by TTL), or the store's own error when it was no refusal.
pub(super) fn refusal(
    key: &str,
    err: SdkError<UpdateItemError>,
) -> Result<Option<ExecutionRecord>, StoreError> {
    match refused_item(&err) {
        Some(item) => decode(key, item).map(Some),
        None if is_condition_failure(&err) => Ok(None),
        None => Err(unavailable(err)),
    }
}

pub(super) fn is_condition_failure(err: &SdkError<UpdateItemError>) -> bool {
    matches!(
        err.as_service_error(),
        Some(UpdateItemError::ConditionalCheckFailedException(_))
    )
}

pub(super) fn decode(
    key: &str,
    item: HashMap<String, AttributeValue>,
) -> Result<ExecutionRecord, StoreError> {
    serde_dynamo::from_item(item).map_err(|e| StoreError::Malformed {
        key: key.into(),
        reason: e.to_string(),
    })
}

/// DynamoDB's error codes that the same request can never get past.
const REFUSED_CODES: [&str; 3] = [
    "ValidationException",
    "AccessDeniedException",
    "SerializationException",
];

/// A failed call as a store error: refused for good, or unavailable for now (transport,
/// timeouts, throttling, a table being created, anything unknown).
pub(super) fn unavailable<E, R>(err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    let refused = err
        .as_service_error()
        .and_then(|e| e.code())
        .is_some_and(|code| REFUSED_CODES.contains(&code));
    if refused {
        StoreError::Refused(crate::aws::describe(&err))
    } else {
        StoreError::Unavailable(crate::aws::describe(&err))
    }
}

impl DynamoStore {
    /// Writes `record` as the first record of its key (one conditional `PutItem`, placed
    /// in the listing's shard, and on the open-by-status index unless it is DONE or
    /// SKIPPED). When the key has a record already nothing is written and that record is
    /// returned.
    pub(super) async fn put_first(
        &self,
        record: &ExecutionRecord,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        match self.put_record(record, &conditions::first()).await? {
            Ok(()) => Ok(None),
            Err(existing) => Ok(existing),
        }
    }

    /// Replaces the record of the attempt `claimed` with `replacement`, if the attempt still
    /// holds it (fenced like every owner's write: one conditional `PutItem`). What the
    /// record is instead when it does not.
    pub(super) async fn put_owned(
        &self,
        claimed: &ExecutionRecord,
        replacement: &ExecutionRecord,
    ) -> Result<(), TransitionError> {
        let owner = claimed.owner.as_deref().unwrap_or_default();
        match self
            .put_record(replacement, &conditions::owner(owner))
            .await?
        {
            Ok(()) => Ok(()),
            // Applied by an earlier try whose answer was lost.
            Err(Some(current))
                if current.status == replacement.status
                    && current.owner == replacement.owner
                    && current.updated_at == replacement.updated_at =>
            {
                Ok(())
            }
            Err(current) => Err(TransitionError::LeaseLost {
                current: current.map(Box::new),
            }),
        }
    }

    /// One conditional `PutItem` of `record` ([`record_item`]: with its listing shard, and its open status
    /// unless DONE or SKIPPED). A refusal gives back the record that was there (None: no item).
    async fn put_record(
        &self,
        record: &ExecutionRecord,
        condition: &Condition,
    ) -> Result<Result<(), Option<ExecutionRecord>>, StoreError> {
        let item = record_item(record);
        let mut request = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition.expression())
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        for (placeholder, attribute) in condition.names() {
            request = request.expression_attribute_names(placeholder, attribute);
        }
        for (placeholder, value) in condition.values() {
            request = request.expression_attribute_values(placeholder, value.clone());
        }
        match self.timed(request.send()).await? {
            Ok(_) => Ok(Ok(())),
            Err(e) => match e.as_service_error() {
                Some(aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(c)) => {
                    match c.item().filter(|i| !i.is_empty()) {
                        Some(item) => Ok(Err(Some(decode(&record.execution_key, item.clone())?))),
                        None => Ok(Err(None)),
                    }
                }
                _ => Err(unavailable(e)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_attribute_in_the_claims_update_has_a_placeholder() {
        assert!(placeholder_names(CLAIM_UPDATE).any(|n| n == "input"));
        assert!(!CLAIM_UPDATE.replace("#", "").contains("##"));
    }
}
