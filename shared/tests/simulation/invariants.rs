//! What must hold after every seed, whatever befell it.

use schedkit::Status;
use schedkit::batch::attr;

use super::world::{EXCLUSIVE, INVOICE, QUEUED, Report};

/// The key an envelope's text names, if any.
fn key_of(body: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()?
        .get("key")?
        .as_str()
        .map(str::to_string)
}

/// Every invariant `report` breaks, each said in a line.
pub fn check(report: &Report) -> Vec<String> {
    let mut broken = Vec::new();
    let records = &report.store.records;
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
    let lettered = |key: &str| {
        report
            .dead_letters
            .iter()
            .any(|l| key_of(&l.body).as_deref() == Some(key))
    };
    for sent in &report.sent {
        let Some(key) = &sent.key else {
            // Poison: its letter.
            if !report.dead_letters.iter().any(|l| l.body == sent.body) {
                broken.push(format!("poison not dead-lettered: {}", sent.body));
            }
            continue;
        };
        if sent.conflict {
            // Whichever of the two payloads came second is refused.
            let refused = report.dead_letters.iter().any(|l| {
                key_of(&l.body).as_deref() == Some(key.as_str())
                    && l.attributes
                        .get(attr::REASON)
                        .and_then(|r| r.string.as_deref())
                        == Some("key-conflict")
            });
            if !refused {
                broken.push(format!(
                    "{key}: two payloads, neither refused as a key conflict"
                ));
            }
            continue;
        }
        // Every run decided: DONE, SKIPPED by its policy, or FAILED with its letter.
        match records.get(key).map(|r| r.status) {
            Some(Status::Done | Status::Skipped) => {}
            Some(Status::Failed) if lettered(key) => {}
            Some(Status::Failed) => broken.push(format!("{key}: FAILED without a dead letter")),
            other => broken.push(format!("{key}: lost, its record {other:?}")),
        }
    }
    // Effects: never twice; with every DONE run of a job that has them, never without one.
    for (key, n) in &report.store.effects_applied {
        if *n > 1 {
            broken.push(format!("{key}: effects applied {n} times"));
        }
        if records.get(key).map(|r| r.status) != Some(Status::Done) {
            broken.push(format!("{key}: effects applied, but the run is not DONE"));
        }
    }
    for (key, r) in records {
        if r.job == INVOICE
            && r.status == Status::Done
            && !report.store.effects_applied.contains_key(key)
        {
            broken.push(format!("{key}: DONE without its effects"));
        }
    }
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
