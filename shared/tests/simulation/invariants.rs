//! What must hold after every seed, whatever befell it.

use schedkit::Status;
use schedkit::dead_letter::attr;
use schedkit::orchestrator::Answer;

use super::world::{BROKEN, CHAINS, EXCLUSIVE, INVOICE, QUEUED, Report, What, key_of};

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
    // A decided record is never written again.
    broken.extend(report.store.rewrites.iter().cloned());
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

/// Effects: never twice; with every DONE run of a job that has them, never without one.
/// And a job's run is DONE only when its job ran.
fn effects(report: &Report, broken: &mut Vec<String>) {
    let records = &report.store.records;
    for (key, n) in &report.store.effects_applied {
        if *n > 1 {
            broken.push(format!("{key}: effects applied {n} times"));
        }
        if records.get(key).map(|r| r.status) != Some(Status::Done) {
            broken.push(format!("{key}: effects applied, but the run is not DONE"));
        }
    }
    for (key, r) in records {
        if key.starts_with(".schedkit/") {
            broken.push(format!("{key}: a run recorded in schedkit's own key space"));
        }
        if r.job == INVOICE
            && r.status == Status::Done
            && !report.store.effects_applied.contains_key(key)
        {
            broken.push(format!("{key}: DONE without its effects"));
        }
        let chain = CHAINS.contains(&r.job.as_str());
        if !chain && r.status == Status::Done && !report.observed.runs.contains_key(key) {
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
            Status::Done if r.job == BROKEN => {
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
            _ => {}
        }
    }
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
