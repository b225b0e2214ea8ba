//! Why a job is paused: who paused it, when and why, kept in the job's own item
//! ([`super::job_key`], beside its streak of failed runs, invisible to every index). The
//! pause itself is the schedule's DISABLED state in EventBridge Scheduler
//! (`schedkit::trigger::pause`), which follows this record: the record is the decision, one
//! conditional write, and the schedule is then made to agree with it (by the pause or
//! resume that wrote it, and by every sync).
//!
//! - A pause is written only where there is none: an operator's reason is never
//!   overwritten, by a worker or by another operator.
//! - An automatic pause is written only while the streak it was counted on is still there:
//!   a resume in between (which forgets the streak) wins.
//! - A resume removes the pause and the streak in one write (after a read of the pause it
//!   ends), and keeps the pause it ended as a window ([`PauseWindow`]) for a few days: the
//!   accountant does not expect the firings a pause withheld, even when the pause began and
//!   ended between two of its checks.
//!
//! Stages deployed before this item existed kept pauses under `pause#<job>`: such a legacy
//! record still counts as a pause (read with the new one, in the same request; a newer
//! pause in the job's item is shown instead, and no pause is written over a legacy one)
//! and is removed by a resume, but only while it is not an execution record: keys like
//! `pause#<job>` are ordinary execution keys now.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, ReturnValue};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::condition::Condition;
use super::{KEY_ATTRIBUTE, StoreCall, StoreError, job_key};

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

/// A span a job was paused, ended by a resume: its firings in it were withheld, and the
/// accountant must not expect them (a pause and a resume between two of its checks once
/// read as missed firings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseWindow {
    /// When the pause began, RFC 3339 in UTC.
    pub from: String,
    /// When the resume ended it, RFC 3339 in UTC.
    pub to: String,
}

impl PauseWindow {
    /// Whether the firing at `at` fell in the window.
    pub fn holds(&self, at: DateTime<Utc>) -> bool {
        self.holds_within(at, chrono::Duration::zero())
    }

    /// Whether the firing at `at` fell in the window widened by `edge` at each end.
    pub fn holds_within(&self, at: DateTime<Utc>, edge: chrono::Duration) -> bool {
        let instant = |t: &str| DateTime::parse_from_rfc3339(t).ok().map(|t| t.to_utc());
        match (instant(&self.from), instant(&self.to)) {
            (Some(from), Some(to)) => from - edge <= at && at < to + edge,
            _ => false,
        }
    }
}

/// How long an ended pause is remembered: longer than any span a check of the accountant
/// judges (two days, and the longest a firing is waited for).
pub const KEEP_PAUSE_WINDOWS: chrono::Duration = chrono::Duration::days(4);

/// The ended pauses a resume at `now` leaves: those kept from before (the ones older than
/// [`KEEP_PAUSE_WINDOWS`] forgotten), and the pause it ends (`pause_at`: when it began),
/// if the job was paused.
pub fn windows_after_resume(
    previous: &[PauseWindow],
    pause_at: Option<&str>,
    now: DateTime<Utc>,
) -> Vec<PauseWindow> {
    let forget = crate::store::timestamp(now - KEEP_PAUSE_WINDOWS);
    let mut windows: Vec<PauseWindow> = previous
        .iter()
        .filter(|w| w.to.as_str() >= forget.as_str())
        .cloned()
        .collect();
    if let Some(from) = pause_at {
        windows.push(PauseWindow {
            from: from.to_string(),
            to: crate::store::timestamp(now),
        });
    }
    windows
}

/// What a job's item says of its pauses: the one it is in, if any, and those ended lately.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PauseHistory {
    /// Its pause now.
    pub paused: Option<PauseRecord>,
    /// Its pauses ended within [`KEEP_PAUSE_WINDOWS`].
    pub ended: Vec<PauseWindow>,
}

/// How far around a pause's edges a firing counts as withheld. A pause's times are the
/// operator's (or worker's) clock, within the clock-skew bound of the Scheduler's; and a
/// resume records its end before it enables the schedule (the record is what the schedule
/// is made to follow), so a firing due in between was held back though it falls after the
/// window. Such a firing, reported missed, was none. A minute: longer than the skew bound
/// and a resume's few Scheduler calls, and no schedule fires more often. A firing that was
/// truly lost within a minute of a pause's edge is the one not reported.
pub const PAUSE_EDGE: chrono::Duration = chrono::Duration::minutes(1);

impl PauseHistory {
    /// Whether a firing at `at` was withheld by a pause: in an ended one, or at or after
    /// the start of the one it is in, each widened by [`PAUSE_EDGE`].
    pub fn withheld(&self, at: DateTime<Utc>) -> bool {
        let paused_since = self
            .paused
            .as_ref()
            .and_then(|p| DateTime::parse_from_rfc3339(&p.at).ok())
            .map(|t| t.to_utc());
        paused_since.is_some_and(|p| at >= p - PAUSE_EDGE)
            || self.ended.iter().any(|w| w.holds_within(at, PAUSE_EDGE))
    }
}

/// The ended pauses a job's item holds.
fn windows_of(item: &HashMap<String, AttributeValue>) -> Vec<PauseWindow> {
    item.get(WINDOWS)
        .and_then(|v| serde_dynamo::from_attribute_value(v.clone()).ok())
        .unwrap_or_default()
}

/// The attribute of a job's item that keeps its ended pauses.
const WINDOWS: &str = "pause_windows";

/// What a pause write found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Paused {
    /// The job is paused now, by this write.
    Now,
    /// The job was paused already: that pause (who, when, why) is kept as it was.
    Already(PauseRecord),
    /// An automatic pause whose streak was forgotten meanwhile (a resume came first):
    /// nothing was written.
    StreakEnded,
}

/// The pause records as pausing and resuming need them, whoever keeps them: a stage's
/// executions table ([`Pauses`]) or the memory store (the worker's logic tested, and
/// simulated, without DynamoDB). Each write is one conditional write, as [`Pauses`] says.
pub trait PauseStore: Send + Sync + std::fmt::Debug {
    /// The pause of `job`, if it is paused (a strongly consistent read).
    fn pause_of<'a>(
        &'a self,
        job: &'a str,
    ) -> StoreCall<'a, Result<Option<PauseRecord>, StoreError>>;

    /// Pauses `pause.job` unless it is paused already ([`Pauses::pause`]).
    fn pause<'a>(&'a self, pause: &'a PauseRecord) -> StoreCall<'a, Result<Paused, StoreError>>;

    /// The automatic pause after `streak` consecutive FAILED runs
    /// ([`Pauses::pause_after_streak`]).
    fn pause_after_streak<'a>(
        &'a self,
        pause: &'a PauseRecord,
        streak: u32,
    ) -> StoreCall<'a, Result<Paused, StoreError>>;

    /// Ends the pause of `job` and forgets its streak, noting `now` as its resume
    /// ([`Pauses::resume`]).
    fn resume<'a>(
        &'a self,
        job: &'a str,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<Option<PauseRecord>, StoreError>>;
}

impl PauseStore for Pauses {
    fn pause_of<'a>(
        &'a self,
        job: &'a str,
    ) -> StoreCall<'a, Result<Option<PauseRecord>, StoreError>> {
        Box::pin(self.get(job))
    }

    fn pause<'a>(&'a self, pause: &'a PauseRecord) -> StoreCall<'a, Result<Paused, StoreError>> {
        Box::pin(Pauses::pause(self, pause))
    }

    fn pause_after_streak<'a>(
        &'a self,
        pause: &'a PauseRecord,
        streak: u32,
    ) -> StoreCall<'a, Result<Paused, StoreError>> {
        Box::pin(Pauses::pause_after_streak(self, pause, streak))
    }

    fn resume<'a>(
        &'a self,
        job: &'a str,
        now: DateTime<Utc>,
    ) -> StoreCall<'a, Result<Option<PauseRecord>, StoreError>> {
        Box::pin(Pauses::resume(self, job, now))
    }
}

/// The pause records of a stage's executions table.
#[derive(Debug, Clone)]
pub struct Pauses {
    ddb: Client,
    table: String,
}

/// The attributes a pause sets on the job's item.
const PAUSE_FIELDS: [&str; 3] = ["by", "at", "reason"];

/// Before [`Pauses::of`] asks again for `left` unprocessed keys (throttling): a wait that
/// doubles, and an error after [`UNPROCESSED_ROUNDS`] rather than a spin.
async fn back_off(round: u32, left: usize) -> Result<(), StoreError> {
    if round == 0 {
        return Ok(());
    }
    if round > UNPROCESSED_ROUNDS {
        return Err(failed(
            "reading the jobs' pauses".into(),
            format!("{left} keys still unprocessed after {UNPROCESSED_ROUNDS} rounds (throttled)"),
        ));
    }
    tokio::time::sleep(std::time::Duration::from_millis(50 << round.min(6))).await;
    Ok(())
}

/// How many times [`Pauses::of`] asks again for keys DynamoDB left unprocessed.
const UNPROCESSED_ROUNDS: u32 = 8;

/// Reads and writes a resume makes before it says the pause kept changing under it.
pub(crate) const RESUME_TRIES: usize = 4;

/// The condition of a pause's write: the job's item holds no pause (an operator's reason
/// is never overwritten, by a worker or by another operator) and, for an automatic pause
/// (`streak`: the failed runs it was counted on), at least that many failed runs still (a
/// resume in between forgot them, and wins). Both stores decide a pause by it.
pub(crate) fn pause_condition(streak: Option<u32>) -> Condition {
    match streak {
        None => Condition::new("attribute_not_exists(#by)"),
        Some(n) => Condition::new("attribute_not_exists(#by) AND size(#failed_keys) >= :streak")
            .value(":streak", AttributeValue::N(n.to_string())),
    }
}

/// The condition of a resume's write: the job's item still holds the pause read (`pause`),
/// or still none. Both stores decide a resume by it.
pub(crate) fn resume_condition(pause: Option<&PauseRecord>) -> Condition {
    match pause {
        Some(p) => Condition::new("#at = :at").value(":at", AttributeValue::S(p.at.clone())),
        None => Condition::new("attribute_not_exists(#at)"),
    }
}

/// Whether the job's item (as read after a resume's write was refused) shows that very
/// write applied: no pause, and the resume's own time (`resumed_at`, epoch ms). The SDK
/// sends a request again when its answer did not come; the second try is then refused by
/// the first. Both stores decide by it.
pub(crate) fn resumed_by(item: &HashMap<String, AttributeValue>, now: DateTime<Utc>) -> bool {
    let at_now = matches!(
        item.get("resumed_at"),
        Some(AttributeValue::N(ms)) if *ms == now.timestamp_millis().to_string()
    );
    at_now && !item.contains_key("at")
}

/// Where stages before the job item kept a pause.
fn legacy_key(job: &str) -> String {
    format!("pause#{job}")
}

fn key(text: String) -> HashMap<String, AttributeValue> {
    HashMap::from([(KEY_ATTRIBUTE.to_string(), AttributeValue::S(text))])
}

/// The pause a job's item (or a legacy pause item) holds, if any. A legacy key that holds
/// an execution record (it has a status) is not a pause.
fn pause_of(
    job: &str,
    item: &HashMap<String, AttributeValue>,
) -> Result<Option<PauseRecord>, StoreError> {
    if !item.contains_key("by") || item.contains_key("status") {
        return Ok(None);
    }
    let mut fields: HashMap<String, AttributeValue> = PAUSE_FIELDS
        .iter()
        .filter_map(|f| item.get(*f).map(|v| (f.to_string(), v.clone())))
        .collect();
    fields.insert("job".into(), AttributeValue::S(job.to_string()));
    serde_dynamo::from_item(fields)
        .map(Some)
        .map_err(|e| StoreError::Malformed {
            key: job_key(job),
            reason: e.to_string(),
        })
}

fn failed(what: String, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("{what}: {e}"))
}

fn is_condition_failure<E: aws_sdk_dynamodb::error::ProvideErrorMetadata>(e: &E) -> bool {
    e.code() == Some("ConditionalCheckFailedException")
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

    /// The pause of `job`, if it is paused (one strongly consistent read). A table that
    /// does not exist (a schedule group of no deployed stage) holds no pause.
    pub async fn get(&self, job: &str) -> Result<Option<PauseRecord>, StoreError> {
        Ok(self.of([job]).await?.remove(job))
    }

    /// The pauses of `jobs`, by job (paused ones only): one strongly consistent
    /// `BatchGetItem` per 50 jobs.
    pub async fn of<'a>(
        &self,
        jobs: impl IntoIterator<Item = &'a str>,
    ) -> Result<BTreeMap<String, PauseRecord>, StoreError> {
        Ok(self
            .history_of(jobs)
            .await?
            .into_iter()
            .filter_map(|(job, h)| h.paused.map(|p| (job, p)))
            .collect())
    }

    /// The pause and the recently ended pauses of each of `jobs` (those with neither are
    /// left out), read as [`of`](Self::of) reads them.
    pub async fn history_of<'a>(
        &self,
        jobs: impl IntoIterator<Item = &'a str>,
    ) -> Result<BTreeMap<String, PauseHistory>, StoreError> {
        let jobs: Vec<&str> = jobs.into_iter().collect();
        let mut out: BTreeMap<String, PauseHistory> = BTreeMap::new();
        for chunk in jobs.chunks(50) {
            let mut wanted: HashMap<String, (&str, bool)> = HashMap::new();
            for job in chunk {
                wanted.insert(job_key(job), (job, false));
                wanted.insert(legacy_key(job), (job, true));
            }
            let mut keys: Vec<HashMap<String, AttributeValue>> =
                wanted.keys().map(|k| key(k.clone())).collect();
            let mut found: Vec<(&str, bool, PauseRecord)> = Vec::new();
            let mut ended: Vec<(&str, Vec<PauseWindow>)> = Vec::new();
            let mut round = 0u32;
            while !keys.is_empty() {
                back_off(round, keys.len()).await?;
                round += 1;
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut keys)))
                    .consistent_read(true)
                    .build()
                    .expect("keys are set");
                let answer = match self
                    .ddb
                    .batch_get_item()
                    .request_items(&self.table, request)
                    .send()
                    .await
                {
                    Ok(out) => out,
                    Err(e)
                        if e.as_service_error()
                            .is_some_and(|s| s.is_resource_not_found_exception()) =>
                    {
                        return Ok(BTreeMap::new());
                    }
                    Err(e) => {
                        return Err(failed(
                            "reading the jobs' pauses".into(),
                            crate::aws::describe(&e),
                        ));
                    }
                };
                for item in answer
                    .responses
                    .unwrap_or_default()
                    .remove(&self.table)
                    .unwrap_or_default()
                {
                    let Some(k) = item.get(KEY_ATTRIBUTE).and_then(|v| v.as_s().ok()) else {
                        continue;
                    };
                    let Some(&(job, legacy)) = wanted.get(k) else {
                        continue;
                    };
                    if let Some(p) = pause_of(job, &item)? {
                        found.push((job, legacy, p));
                    }
                    let windows = windows_of(&item);
                    if !legacy && !windows.is_empty() {
                        ended.push((job, windows));
                    }
                }
                // What DynamoDB did not get to (throttling, size) is asked again.
                if let Some(left) = answer
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.table))
                {
                    keys = left.keys;
                }
            }
            // The job's own item wins over a legacy one.
            found.sort_by_key(|(_, legacy, _)| !*legacy);
            for (job, _, p) in found {
                out.entry(job.to_string()).or_default().paused = Some(p);
            }
            for (job, windows) in ended {
                out.entry(job.to_string()).or_default().ended = windows;
            }
        }
        Ok(out)
    }

    /// Pauses `pause.job` unless it is paused already: an existing pause (who, when, why)
    /// is never overwritten ([`Paused::Already`]). One conditional `UpdateItem`.
    pub async fn pause(&self, pause: &PauseRecord) -> Result<Paused, StoreError> {
        self.write_pause(pause, None).await
    }

    /// The worker's automatic pause after `streak` consecutive FAILED runs: written only
    /// where there is no pause, and only while the job's streak still holds at least
    /// `streak` runs (a resume forgets it: [`Paused::StreakEnded`]).
    pub async fn pause_after_streak(
        &self,
        pause: &PauseRecord,
        streak: u32,
    ) -> Result<Paused, StoreError> {
        self.write_pause(pause, Some(streak)).await
    }

    async fn write_pause(
        &self,
        pause: &PauseRecord,
        streak: Option<u32>,
    ) -> Result<Paused, StoreError> {
        // A pause an earlier version kept under `pause#<job>` is a pause all the same, and
        // is never written over. One read before the write is enough: this version writes
        // no legacy record, so one can go away (a resume) but not appear, unless an older
        // CLI still pauses the stage meanwhile (then both exist, and a resume ends both).
        if let Some(legacy) = self.legacy(&pause.job).await? {
            return Ok(Paused::Already(legacy));
        }
        let mut request = self
            .ddb
            .update_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, AttributeValue::S(job_key(&pause.job)))
            .update_expression("SET #by = :by, #at = :at, #reason = :reason")
            .expression_attribute_names("#by", "by")
            .expression_attribute_names("#at", "at")
            .expression_attribute_names("#reason", "reason")
            .expression_attribute_values(":by", AttributeValue::S(pause.by.clone()))
            .expression_attribute_values(":at", AttributeValue::S(pause.at.clone()))
            .expression_attribute_values(":reason", AttributeValue::S(pause.reason.clone()))
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            );
        let condition = pause_condition(streak);
        request = request.condition_expression(condition.expression());
        for (placeholder, attribute) in condition.names() {
            request = request.expression_attribute_names(placeholder, attribute);
        }
        for (placeholder, value) in condition.values() {
            request = request.expression_attribute_values(placeholder, value.clone());
        }
        match request.send().await {
            Ok(_) => Ok(Paused::Now),
            Err(e) => match e.as_service_error() {
                Some(
                    aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(c),
                ) => {
                    let item = c.item().cloned().unwrap_or_default();
                    match pause_of(&pause.job, &item)? {
                        Some(existing) => Ok(Paused::Already(existing)),
                        None => Ok(Paused::StreakEnded),
                    }
                }
                _ => Err(failed(
                    format!("recording the pause of {}", pause.job),
                    crate::aws::describe(&e),
                )),
            },
        }
    }

    /// The pause an earlier version recorded for `job` under `pause#<job>`, if any (one
    /// strongly consistent read; an execution record under that key is not a pause).
    async fn legacy(&self, job: &str) -> Result<Option<PauseRecord>, StoreError> {
        let item = self
            .ddb
            .get_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, AttributeValue::S(legacy_key(job)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| {
                failed(
                    format!("reading the earlier pause record of {job}"),
                    crate::aws::describe(&e),
                )
            })?
            .item;
        item.map_or(Ok(None), |item| pause_of(job, &item))
    }

    /// The resume's write to the job's item: the pause read ended (kept as a window) if the
    /// item still holds that very pause, else read again. A read and a conditional write.
    async fn end_pause(
        &self,
        job: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<PauseRecord>, StoreError> {
        // The pause a refused write was to end: the write may have been refused by itself.
        let mut refused: Option<PauseRecord> = None;
        for _ in 0..RESUME_TRIES {
            let item = self
                .ddb
                .get_item()
                .table_name(&self.table)
                .key(KEY_ATTRIBUTE, AttributeValue::S(job_key(job)))
                .consistent_read(true)
                .send()
                .await
                .map_err(|e| failed(format!("resuming {job}"), crate::aws::describe(&e)))?
                .item
                .unwrap_or_default();
            if refused.is_some() && resumed_by(&item, now) {
                return Ok(refused);
            }
            let pause = pause_of(job, &item)?;
            let windows = windows_after_resume(
                &windows_of(&item),
                pause.as_ref().map(|p| p.at.as_str()),
                now,
            );
            let condition = resume_condition(pause.as_ref());
            let mut request = self
                .ddb
                .update_item()
                .table_name(&self.table)
                .key(KEY_ATTRIBUTE, AttributeValue::S(job_key(job)))
                .update_expression(
                    "SET #resumed_at = :resumed_at, #pause_windows = :windows \
                     REMOVE #by, #at, #reason, #failed_keys, #last_error",
                )
                .condition_expression(condition.expression())
                .expression_attribute_values(
                    ":resumed_at",
                    AttributeValue::N(now.timestamp_millis().to_string()),
                )
                .expression_attribute_values(
                    ":windows",
                    serde_dynamo::to_attribute_value(&windows).expect("windows serialise"),
                );
            for name in [
                "resumed_at",
                WINDOWS,
                "by",
                "at",
                "reason",
                "failed_keys",
                "last_error",
            ] {
                request = request.expression_attribute_names(format!("#{name}"), name);
            }
            for (placeholder, value) in condition.values() {
                request = request.expression_attribute_values(placeholder, value.clone());
            }
            match request.send().await {
                Ok(_) => return Ok(pause),
                // Paused or resumed by someone else between the read and the write, or
                // by this write's own first try (the next read tells).
                Err(e) if e.as_service_error().is_some_and(is_condition_failure) => {
                    refused = pause;
                    continue;
                }
                Err(e) => return Err(failed(format!("resuming {job}"), crate::aws::describe(&e))),
            }
        }
        Err(failed(
            format!("resuming {job}"),
            format!("its pause changed under each of {RESUME_TRIES} tries"),
        ))
    }

    /// Ends the pause of `job` and forgets its run of failures (a resumed job gets its full
    /// `pause_after_failures` again), in one write that notes `now` as its resume (a run
    /// that failed before it is not counted again); returns the pause it ended, if there
    /// was one. A legacy pause record is removed too (never an execution record).
    pub async fn resume(
        &self,
        job: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<PauseRecord>, StoreError> {
        let ended = self.end_pause(job, now).await?;
        let legacy = match self
            .ddb
            .delete_item()
            .table_name(&self.table)
            .key(KEY_ATTRIBUTE, AttributeValue::S(legacy_key(job)))
            .condition_expression("attribute_exists(#by) AND attribute_not_exists(#status)")
            .expression_attribute_names("#by", "by")
            .expression_attribute_names("#status", "status")
            .return_values(ReturnValue::AllOld)
            .send()
            .await
        {
            Ok(out) => pause_of(job, &out.attributes.unwrap_or_default())?,
            Err(e) if e.as_service_error().is_some_and(is_condition_failure) => None,
            Err(e) => {
                return Err(failed(
                    format!("removing the earlier pause record of {job}"),
                    crate::aws::describe(&e),
                ));
            }
        };
        Ok(ended.or(legacy))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.into())
    }

    /// A resume records the pause's end, then enables the schedule: a firing due between
    /// the two was held back, though after the window's end; and a pause's times are the
    /// operator's clock, within the skew bound of the Scheduler's. Such firings were
    /// expected, and reported missed. Within a minute of a pause's edges they are not.
    #[test]
    fn a_firing_at_a_pauses_edge_is_withheld_and_one_a_minute_away_is_not() {
        let at = |t: &str| -> DateTime<Utc> { t.parse().unwrap() };
        let ended = PauseHistory {
            paused: None,
            ended: vec![PauseWindow {
                from: "2026-12-01T10:00:00.000Z".into(),
                to: "2026-12-01T11:00:00.000Z".into(),
            }],
        };
        assert!(ended.withheld(at("2026-12-01T10:30:00Z")));
        assert!(
            ended.withheld(at("2026-12-01T11:00:00.400Z")),
            "enabled after `to`"
        );
        assert!(
            ended.withheld(at("2026-12-01T09:59:59.600Z")),
            "a clock behind"
        );
        assert!(!ended.withheld(at("2026-12-01T11:01:01Z")));
        assert!(!ended.withheld(at("2026-12-01T09:58:59Z")));
        let paused = PauseHistory {
            paused: Some(PauseRecord {
                job: "j".into(),
                by: "ops".into(),
                at: "2026-12-01T10:00:00.000Z".into(),
                reason: "r".into(),
            }),
            ended: Vec::new(),
        };
        assert!(
            paused.withheld(at("2026-12-01T09:59:59.600Z")),
            "a clock behind"
        );
        assert!(!paused.withheld(at("2026-12-01T09:58:59Z")));
    }

    #[test]
    fn a_pause_is_read_from_its_fields_and_an_execution_record_is_never_one() {
        let paused = HashMap::from([
            ("by".to_string(), s("arn:aws:iam::1:user/ops")),
            ("at".to_string(), s("2026-12-01T00:00:00Z")),
            ("reason".to_string(), s("partner down")),
            (
                "failed_keys".to_string(),
                AttributeValue::Ss(vec!["k".into()]),
            ),
        ]);
        let p = pause_of("long-report", &paused).unwrap().unwrap();
        assert_eq!(
            (p.job.as_str(), p.by.as_str(), p.reason.as_str()),
            ("long-report", "arn:aws:iam::1:user/ops", "partner down")
        );
        let streak_only = HashMap::from([(
            "failed_keys".to_string(),
            AttributeValue::Ss(vec!["k".into()]),
        )]);
        assert_eq!(pause_of("long-report", &streak_only).unwrap(), None);
        let mut record = paused.clone();
        record.insert("status".into(), s("DONE"));
        assert_eq!(pause_of("long-report", &record).unwrap(), None);
    }
}
