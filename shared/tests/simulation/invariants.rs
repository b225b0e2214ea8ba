//! What must hold after every seed, whatever befell it.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;
use schedkit::Status;
use schedkit::dead_letter::attr;
use schedkit::orchestrator::Answer;
use schedkit::store::{Change, ExecutionRecord};

use super::world::{BROKEN, CHAINS, EFFECTS, EXCLUSIVE, INVOICE, QUEUED, Report, What, key_of};

/// Every invariant `report` breaks, each said in a line.
pub fn check(report: &Report) -> Vec<String> {
    let mut broken = Vec::new();
    if report.left_in_queue > 0 {
        broken.push(format!(
            "not drained: {} messages left in the queue",
            report.left_in_queue
        ));
    }
    // Every dead letter says why.
    for letter in &report.dead_letters {
        if !letter.attributes.contains_key(attr::REASON) {
            broken.push(format!(
                "a dead letter without a reason (the redrive policy moved it): {}",
                letter.body
            ));
        }
    }
    for sent in &report.sent {
        sent_accounted_for(report, &sent.what, &sent.body, &mut broken);
    }
    effects(report, &mut broken);
    expected(report, &mut broken);
    chains(report, &mut broken);
    super::limits::flow(&report.seen, &report.store, &report.kept, &mut broken);
    super::pauses::check(&report.pauses, &report.store.pauses, &mut broken);
    // A decided record is never written again (but to note a cancelled run's late attempt).
    rewrites(&report.store.changes, &mut broken);
    // Overlap: never two bodies of a job whose policy runs one at a time.
    for job in [EXCLUSIVE, QUEUED] {
        let most = report.observed.most_at_once.get(job).copied().unwrap_or(0);
        if most > 1 {
            broken.push(format!(
                "{job}: {most} runs at once under its overlap policy"
            ));
        }
    }
    broken
}

/// The reason on the last letter of `key`, if it has one.
fn letter_reason<'r>(report: &'r Report, key: &str) -> Option<&'r str> {
    report
        .dead_letters
        .iter()
        .filter(|l| key_of(&l.body).as_deref() == Some(key))
        .filter_map(|l| l.attributes.get(attr::REASON)?.string.as_deref())
        .next_back()
}

/// Every message accounted for: a run decided (DONE, SKIPPED by its policy, or FAILED
/// with its letter), poison and conflicts dead-lettered, chain runs ended, forged ends
/// refused.
fn sent_accounted_for(report: &Report, what: &What, body: &str, broken: &mut Vec<String>) {
    let records = &report.store.records;
    let lettered_as = |reason: &str| {
        report.dead_letters.iter().any(|l| {
            l.body == body
                && l.attributes
                    .get(attr::REASON)
                    .and_then(|r| r.string.as_deref())
                    == Some(reason)
        })
    };
    match what {
        What::Poison if !lettered_as("poison") => {
            broken.push(format!("poison not dead-lettered: {body}"));
        }
        What::Run {
            key,
            conflict: true,
        } if !report.dead_letters.iter().any(|l| {
            key_of(&l.body).as_deref() == Some(key.as_str())
                && l.attributes
                    .get(attr::REASON)
                    .and_then(|r| r.string.as_deref())
                    == Some("key-conflict")
        }) =>
        {
            broken.push(format!(
                "{key}: two payloads, neither refused as a key conflict"
            ));
        }
        What::Run {
            key,
            conflict: false,
        } => match records.get(key).map(|r| r.status) {
            Some(Status::Done | Status::Skipped) => {}
            Some(Status::Failed) if letter_reason(report, key).is_some() => {}
            Some(Status::Failed) => broken.push(format!("{key}: FAILED without a dead letter")),
            Some(Status::Cancelled) if report.cancelled.contains(key) => {}
            other => broken.push(format!("{key}: lost, its record {other:?}")),
        },
        What::Chain { key } => match records.get(key).map(|r| r.status) {
            Some(Status::Done | Status::Paused) => {}
            Some(Status::Cancelled) if report.cancelled.contains(key) => {}
            other => broken.push(format!("chain run {key}: not ended, its record {other:?}")),
        },
        What::ForgedEnd { key } if !lettered_as("record-mismatch") => {
            broken.push(format!("a chain end forged for {key} was not refused"));
        }
        What::InternalKey { key } if !lettered_as("poison") => {
            broken.push(format!(
                "a run keyed {key}, schedkit's own item, was not poison"
            ));
        }
        _ => {}
    }
}

/// The bodies whose effect landed in the world's table ([`EFFECTS`]), by run key: read
/// from the items the store's transactions wrote there, as any reader of that table would.
fn effects_landed(report: &Report) -> BTreeMap<String, BTreeSet<String>> {
    let mut landed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, write) in report.store.puts() {
        let Some(put) = write.put().filter(|p| p.table_name() == EFFECTS) else {
            continue;
        };
        let text = |name: &str| match put.item().get(name) {
            Some(AttributeValue::S(v) | AttributeValue::N(v)) => v.clone(),
            other => format!("{other:?}"),
        };
        landed
            .entry(text("effect_key"))
            .or_default()
            .insert(text("body"));
    }
    landed
}

/// Effects, as the world's table holds them: never from two bodies of a run, never from a
/// body that did not run, never without the run DONE; with every DONE run of a job that has
/// them, never missing. And a job's run is DONE only when its job ran.
fn effects(report: &Report, broken: &mut Vec<String>) {
    let records = &report.store.records;
    let landed = effects_landed(report);
    for (key, bodies) in &landed {
        if bodies.len() > 1 {
            broken.push(format!(
                "{key}: effects of {} bodies applied: {bodies:?}",
                bodies.len()
            ));
        }
        let ran = report.observed.runs.get(key).copied().unwrap_or(0);
        for body in bodies {
            if body.parse::<u32>().map_or(true, |b| b == 0 || b > ran) {
                broken.push(format!(
                    "{key}: an effect of body {body}, of {ran} that ran"
                ));
            }
        }
        if records.get(key).map(|r| r.status) != Some(Status::Done) {
            broken.push(format!("{key}: effects applied, but the run is not DONE"));
        }
    }
    for (key, r) in records {
        if key.starts_with(".schedkit/") {
            broken.push(format!("{key}: a run recorded in schedkit's own key space"));
        }
        // A step an operator skipped (`chains skip`) is DONE without its job's effects.
        let skipped = r.skipped.is_some();
        if r.job == INVOICE && r.status == Status::Done && !skipped && !landed.contains_key(key) {
            broken.push(format!("{key}: DONE without its effects"));
        }
        let chain = CHAINS.contains(&r.job.as_str());
        if !chain && !skipped && r.status == Status::Done && !report.observed.runs.contains_key(key)
        {
            broken.push(format!("{key}: DONE, and its job never ran"));
        }
        if !chain && r.status == Status::Paused {
            broken.push(format!("{key}: a job's run PAUSED, as only a chain run is"));
        }
    }
}

/// Each run ends as its job and its policy allow, whatever befell it: SKIPPED only under
/// an overlap policy that skips (never a chain's step), `broken` never DONE (it always
/// fails for good), CANCELLED only when the operator cancelled it.
fn expected(report: &Report, broken: &mut Vec<String>) {
    for (key, r) in &report.store.records {
        let skips = [EXCLUSIVE, QUEUED].contains(&r.job.as_str()) && !key.contains('#');
        match r.status {
            Status::Skipped if !skips => broken.push(format!(
                "{key}: SKIPPED, though `{}` never skips a run",
                r.job
            )),
            // A step of `broken` an operator skipped (`chains skip`) is DONE by their word.
            Status::Done if r.job == BROKEN && r.skipped.is_none() => {
                broken.push(format!("{key}: DONE, though `{BROKEN}` always fails"));
            }
            Status::Cancelled if !report.cancelled.contains(key) => {
                broken.push(format!("{key}: CANCELLED, and no operator cancelled it"));
            }
            _ => {}
        }
    }
}

/// A chain run ends DONE only when every step is DONE, and PAUSED naming a step that
/// failed; a step's task is answered with success only when the step is DONE.
fn chains(report: &Report, broken: &mut Vec<String>) {
    let records = &report.store.records;
    for (key, r) in records
        .iter()
        .filter(|(_, r)| CHAINS.contains(&r.job.as_str()))
    {
        let steps: Vec<_> = records
            .iter()
            .filter(|(k, _)| {
                k.strip_prefix(key.as_str())
                    .is_some_and(|s| s.starts_with('#'))
            })
            .collect();
        match r.status {
            Status::Done => {
                for (step, s) in steps.iter().filter(|(_, s)| s.status != Status::Done) {
                    broken.push(format!(
                        "chain run {key} DONE, its step {step} {:?}",
                        s.status
                    ));
                }
            }
            Status::Paused => {
                let named = r.last_error.as_deref().unwrap_or_default();
                let failed = steps.iter().any(|(step, s)| {
                    let name = step.rsplit('#').next().unwrap_or_default();
                    let redriven = report.redriven.contains(*step);
                    named.contains(&format!("step `{name}` failed"))
                        && (s.status == Status::Failed || redriven)
                });
                if !failed {
                    broken.push(format!(
                        "chain run {key} PAUSED without naming a step that failed: {named}"
                    ));
                }
            }
            // Cancelled by the operator: nothing of it left to run or running.
            Status::Cancelled => {
                for (step, s) in &steps {
                    if matches!(s.status, Status::Registered | Status::Running) {
                        broken.push(format!(
                            "chain run {key} CANCELLED, its step {step} still {:?}",
                            s.status
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    broken.extend(report.stuck.iter().cloned());
    broken.extend(report.after_cancels.iter().cloned());
    for (token, answer) in &report.answers {
        let Answer::Succeeded(_) = answer else {
            continue;
        };
        let step = report.tasks.get(token).cloned();
        match step.and_then(|k| records.get(&k).map(|r| (k, r.status))) {
            Some((_, Status::Done)) => {}
            other => broken.push(format!("task {token} answered success, its step {other:?}")),
        }
    }
}

/// Every write of the store's stream that changed a decided (DONE, SKIPPED, CANCELLED)
/// record, but the one a decided record takes: a CANCELLED run's late attempt noted.
fn rewrites(changes: &[Change], broken: &mut Vec<String>) {
    for change in changes {
        if let Change::Record {
            request,
            before: Some(before),
            after,
        } = change
            && matches!(
                before.status,
                Status::Done | Status::Skipped | Status::Cancelled
            )
            && !attempts_noted(before, after)
        {
            broken.push(format!(
                "{}: {} record rewritten by `{request}`",
                before.execution_key, before.status
            ));
        }
    }
}

/// Whether `after` is the CANCELLED `before` with attempts added to its history (and the
/// late attempt marked) and nothing else changed: what noting a cancelled run's late
/// attempt does (its status and outcome stay as they were).
fn attempts_noted(before: &ExecutionRecord, after: &ExecutionRecord) -> bool {
    before.status == Status::Cancelled
        && after.history.len() > before.history.len()
        && after.history.starts_with(&before.history)
        && ExecutionRecord {
            history: before.history.clone(),
            late_attempt: before.late_attempt,
            ..after.clone()
        } == *before
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use schedkit::store::{
        AttemptEntry, AttemptOutcome, ClaimOutcome, ClaimRequest, ExecutionStore, MemoryStore,
    };

    use super::*;

    /// A record as a claim writes it.
    async fn claimed() -> ExecutionRecord {
        let store = MemoryStore::default();
        let request = ClaimRequest {
            key: "k".into(),
            job: "j".into(),
            scheduled_for: "2026-12-01T09:00:00Z".into(),
            payload_hash: "h".into(),
            input: "{}".into(),
            message_id: None,
            owner: "w:1".into(),
            now: "2026-12-01T09:00:00Z".parse().unwrap(),
            lease: Duration::from_secs(60),
            retention: Duration::from_secs(3600),
            redrive: None,
        };
        match store.claim(&request).await.unwrap() {
            ClaimOutcome::Claimed { record, .. } => record,
            other => panic!("{other:?}"),
        }
    }

    /// The one write a decided record takes: a CANCELLED run's late attempt noted in its
    /// history. Anything else changed, a history not grown at its end, or another status,
    /// is a rewrite.
    #[tokio::test]
    async fn only_attempts_added_at_the_end_of_the_history_are_not_a_rewrite() {
        let mut before = claimed().await;
        before.status = Status::Cancelled;
        let entry = AttemptEntry {
            attempt: 1,
            owner: "w:1".into(),
            started_at: "2026-12-01T09:00:00.000Z".into(),
            finished_at: "2026-12-01T09:00:05.000Z".into(),
            outcome: AttemptOutcome::Cancelled,
            error: None,
            duration_ms: Some(5000),
            limit_wait: false,
        };
        let mut noted = before.clone();
        noted.history.push(entry.clone());
        assert!(attempts_noted(&before, &noted));
        let mut also_status = noted.clone();
        also_status.status = Status::Done;
        assert!(
            !attempts_noted(&before, &also_status),
            "the status changed too"
        );
        assert!(!attempts_noted(&before, &before), "nothing added");
        let mut shortened = noted.clone();
        shortened.history.clear();
        assert!(!attempts_noted(&noted, &shortened), "the history cut");
        let mut done = before.clone();
        done.status = Status::Done;
        let mut done_noted = done.clone();
        done_noted.history.push(entry);
        assert!(
            !attempts_noted(&done, &done_noted),
            "a DONE record takes no note"
        );
        let mut broken = Vec::new();
        rewrites(
            &[Change::Record {
                request: "finish",
                before: Some(done),
                after: done_noted,
            }],
            &mut broken,
        );
        assert_eq!(broken, ["k: DONE record rewritten by `finish`"]);
    }
}
