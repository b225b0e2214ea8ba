//! Messages that name what is not theirs are refused unrun, and touch nothing: a chain's
//! end for a job's run, for another chain's run, from another execution or none; a step
//! message for another step or another job than the step's; keys naming schedkit's own
//! items; a plain message under a step's key never stands for the step.

use std::collections::BTreeMap;
use std::time::Duration;

use schedkit::batch::Chains;
use schedkit::catalog::Catalog;
use schedkit::dead_letter::attr;
use schedkit::orchestrator::MemoryOrchestrator;
use schedkit::queue::{MemoryQueue, Outgoing};
use schedkit::store::{ClaimOutcome, ClaimRequest, ExecutionStore, MemoryStore};
use schedkit::{Ctx, Envelope, JobPolicy, Jobs, Metrics, Processor, ProcessorConfig, Status};
use serde_json::json;

use super::{config, drain};

const CHAINS: &str = r#"
[jobs.close-books]
owner = "finance"
[jobs.report]
owner = "data"
[chains.month-end]
owner = "finance"
stages = ["close-books", "report"]
[chains.quarter-end]
owner = "finance"
stages = ["report"]
"#;

/// The store, the queue, and a worker that runs `export` (keyed by its `tenant`),
/// `close-books` and `report` (both succeed) and takes the chains' messages; no state
/// machine is known (nothing here starts one).
struct Lane {
    store: MemoryStore,
    queue: MemoryQueue,
    worker: Processor,
}

fn lane() -> Lane {
    let (store, queue) = (MemoryStore::default(), MemoryQueue::new(13));
    let ok = |_ctx: Ctx| async move { Ok::<_, schedkit::JobError>(json!({"ok": true})) };
    let export = JobPolicy {
        key_template: Some("{tenant}".parse().unwrap()),
        ..JobPolicy::default()
    };
    let registry = Jobs::new()
        .add("export", ok)
        .add("close-books", ok)
        .add("report", ok)
        .bind_policies(|n| match n {
            "export" => export.clone(),
            "close-books" => JobPolicy::default(),
            _ => JobPolicy::default(),
        });
    let catalog = Catalog::parse(CHAINS, "chains.toml").unwrap();
    let chains =
        Chains::with_orchestrator(MemoryOrchestrator::default(), &catalog, BTreeMap::new());
    let config = ProcessorConfig {
        chains: Some(chains),
        ..config()
    };
    let worker = Processor::with_queue(
        store.clone(),
        queue.clone(),
        registry,
        config,
        Metrics::capture().0,
    );
    Lane {
        store,
        queue,
        worker,
    }
}

impl Lane {
    /// Sends `bodies`, runs the queue dry (each decided on its first delivery), and
    /// returns the outcome labels and the dead letters they sent.
    async fn decide(&self, bodies: &[String]) -> (Vec<String>, Vec<Outgoing>) {
        for body in bodies {
            self.queue.send_body(body);
        }
        let labels = drain(&self.worker, &self.queue, Duration::from_secs(3)).await;
        assert_eq!(
            labels.len(),
            bodies.len(),
            "decided on their first delivery: {labels:?}"
        );
        let letters = std::mem::take(&mut self.queue.lock().dead_letters);
        (labels, letters)
    }

    /// A job run RUNNING under `key`, owned by `owner` for a minute.
    async fn running_job_run(&self, job: &str, key: &str, owner: &str) {
        let claimed = self
            .store
            .claim(&request(key, job, owner, Duration::from_secs(60)))
            .await;
        assert!(
            matches!(claimed, Ok(ClaimOutcome::Claimed { .. })),
            "{claimed:?}"
        );
    }

    /// The RUNNING record of a run of `chain` under `key`, owned by its first execution.
    async fn running_chain_run(&self, chain: &str, key: &str) -> String {
        let execution = schedkit::key::chain_execution_name(key, 1);
        let started = self
            .store
            .start_chain(&request(key, chain, &execution, Duration::ZERO))
            .await
            .unwrap();
        assert!(started.is_none());
        execution
    }

    fn status(&self, key: &str) -> Option<Status> {
        self.store.snapshot().records.get(key).map(|r| r.status)
    }
}

fn request(key: &str, job: &str, owner: &str, lease: Duration) -> ClaimRequest {
    ClaimRequest {
        key: key.into(),
        job: job.into(),
        scheduled_for: "2026-11-30T06:00:00Z".into(),
        payload_hash: "h".into(),
        input: "{}".into(),
        message_id: Some("m".into()),
        owner: owner.into(),
        now: config().clock.now(),
        lease,
        retention: Duration::from_secs(3600),
        redrive: None,
    }
}

fn text(letter: &Outgoing, name: &str) -> String {
    letter.attributes[name].string.clone().unwrap_or_default()
}

/// The message went to the DLQ unrun as `record-mismatch`, its error containing `says`.
fn assert_mismatch(labels: &[String], letters: &[Outgoing], says: &str) {
    assert_eq!(labels, ["dead-lettered"], "{letters:?}");
    assert_eq!(letters.len(), 1);
    assert_eq!(text(&letters[0], attr::REASON), "record-mismatch");
    let error = text(&letters[0], attr::ERROR);
    assert!(error.contains(says), "{error}");
}

/// A chain's end message: `{"chain": {"name", "key", "outcome", "execution"?}}`.
fn chain_end(chain: &str, key: &str, execution: Option<&str>, outcome: &str) -> String {
    let mut end = json!({ "name": chain, "key": key, "outcome": outcome });
    if let Some(e) = execution {
        end["execution"] = json!(e);
    }
    json!({ "job": chain, "scheduled_for": "2026-11-30T06:00:00Z", "chain": end }).to_string()
}

/// A step message of `month-end` run `chain_key`: its step, job and key as given.
fn step_message(job: &str, key: &str, chain_key: &str, step: &str) -> String {
    json!({
        "job": job,
        "scheduled_for": "2026-11-30T06:00:00Z",
        "key": key,
        "chain": { "name": "month-end", "key": chain_key, "step": step, "task_token": "t" },
    })
    .to_string()
}

#[tokio::test(start_paused = true)]
async fn a_chain_end_for_a_job_run_is_rejected_and_the_run_left_running() {
    let lane = lane();
    let key = "export:acme";
    lane.running_job_run("export", key, "w:owner").await;
    // As a new user wrote it (no execution), and naming one.
    let (labels, letters) = lane
        .decide(&[chain_end("month-end", key, None, "done")])
        .await;
    assert_mismatch(&labels, &letters, "names no execution");
    let end = chain_end("month-end", key, Some("an-execution"), "done");
    let (labels, letters) = lane.decide(&[end]).await;
    assert_mismatch(&labels, &letters, "is a run of `export`");
    let record = &lane.store.snapshot().records[key];
    assert_eq!(
        (record.status, record.owner.as_deref()),
        (Status::Running, Some("w:owner")),
        "the job's run was ended by a message that is not its own: {record:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_chain_end_for_another_chains_run_is_rejected() {
    let lane = lane();
    let key = "month-end#2026-11-30T06:00:00Z";
    let execution = lane.running_chain_run("month-end", key).await;
    let end = chain_end("quarter-end", key, Some(&execution), "done");
    let (labels, letters) = lane.decide(&[end]).await;
    assert_mismatch(&labels, &letters, "`month-end`");
    assert_eq!(lane.status(key), Some(Status::Running));
}

#[tokio::test(start_paused = true)]
async fn a_chain_end_from_another_execution_or_none_is_rejected() {
    let lane = lane();
    let key = "month-end#2026-11-30T06:00:00Z";
    lane.running_chain_run("month-end", key).await;
    let end = chain_end("month-end", key, Some("someone-elses"), "done");
    let (labels, letters) = lane.decide(&[end]).await;
    assert_mismatch(&labels, &letters, "someone-elses");
    let (labels, letters) = lane
        .decide(&[chain_end("month-end", key, None, "done")])
        .await;
    assert_mismatch(&labels, &letters, "names no execution");
    assert_eq!(lane.status(key), Some(Status::Running));
}

#[tokio::test(start_paused = true)]
async fn a_step_answer_for_another_step_is_rejected_unrun() {
    let lane = lane();
    let chain_key = "month-end#2026-11-30T06:00:00Z";
    // The key names `close-books`, the step says `report`.
    let key = format!("{chain_key}#close-books");
    let (labels, letters) = lane
        .decide(&[step_message("report", &key, chain_key, "report")])
        .await;
    assert_mismatch(&labels, &letters, &format!("`{chain_key}#report`"));
    assert_eq!(lane.status(&key), None, "it ran");
}

#[tokio::test(start_paused = true)]
async fn a_step_of_another_job_than_the_steps_is_rejected_unrun() {
    let lane = lane();
    let chain_key = "month-end#2026-11-30T06:00:00Z";
    let key = format!("{chain_key}#report");
    let (labels, letters) = lane
        .decide(&[step_message("export", &key, chain_key, "report")])
        .await;
    assert_mismatch(&labels, &letters, "`report`");
    assert_eq!(lane.status(&key), None, "it ran");
}

#[tokio::test(start_paused = true)]
async fn keys_naming_each_internal_item_are_poison_naming_the_key() {
    let lane = lane();
    let job = "long-report";
    // Each kind of item schedkit keeps beside the records, and one it may keep later.
    let internal = [
        schedkit::store::slot_key(job),
        schedkit::store::job_key(job),
        format!("{}limit/partner-api", schedkit::store::INTERNAL_PREFIX),
    ];
    // Explicit keys, and a key template that derives them.
    let mut bodies = Vec::new();
    for key in &internal {
        let mut e = Envelope::new("export", "2026-11-01T04:00:00Z".parse().unwrap());
        e.key = Some(key.clone());
        bodies.push(e.to_json());
        let mut e = Envelope::new("export", "2026-11-01T04:00:00Z".parse().unwrap());
        e.payload = json!({ "tenant": key }).as_object().cloned();
        bodies.push(e.to_json());
    }
    let (labels, letters) = lane.decide(&bodies).await;
    assert_eq!(labels, ["dead-lettered"; 6], "{letters:?}");
    for letter in &letters {
        assert_eq!(text(letter, attr::REASON), "poison");
        let error = text(letter, attr::ERROR);
        assert!(
            error.contains("reserved for schedkit's own items"),
            "{error}"
        );
    }
    for key in &internal {
        let named = letters
            .iter()
            .filter(|l| text(l, attr::ERROR).contains(&format!("`{key}`")))
            .count();
        assert_eq!(named, 2, "the error names `{key}`");
    }
    assert!(lane.store.snapshot().records.is_empty());
}

/// A plain message under a step's key (the same job, key and payload as the step's
/// message, without the chain) lies in the chain's key space: poison, so it never takes
/// the step's place (first there, it made the step a key conflict and the chain run pause
/// for good). The step's own message then runs as the step.
#[tokio::test(start_paused = true)]
async fn a_plain_message_under_a_steps_key_is_poison_and_the_step_keeps_its_place() {
    let lane = lane();
    let chain_key = "month-end#2026-11-30T06:00:00Z";
    let key = format!("{chain_key}#report");
    let mut plain = Envelope::new("report", "2026-11-30T06:00:00Z".parse().unwrap());
    plain.key = Some(key.clone());
    let (labels, letters) = lane.decide(&[plain.to_json()]).await;
    assert_eq!(labels, ["dead-lettered"], "{letters:?}");
    assert_eq!(text(&letters[0], attr::REASON), "poison");
    assert!(
        text(&letters[0], attr::ERROR).contains("chain `month-end`"),
        "{letters:?}"
    );
    assert!(lane.store.snapshot().records.is_empty());
    let step = step_message("report", &key, chain_key, "report");
    let (labels, letters) = lane.decide(&[step]).await;
    assert_eq!(labels, ["succeeded"], "{letters:?}");
}

/// A step of `month-end` for a run keyed outside its key space (another chain's run, or a
/// key of no chain): it would claim that run's step key with month-end's payload, and the
/// real step there meet a key conflict. Refused before any claim.
#[tokio::test(start_paused = true)]
async fn a_step_for_a_run_outside_its_chains_key_space_is_refused() {
    let lane = lane();
    for chain_key in ["year-end#2026-12-31T06:00:00Z", "q4"] {
        let key = format!("{chain_key}#report");
        let step = step_message("report", &key, chain_key, "report");
        let (labels, letters) = lane.decide(&[step]).await;
        assert_mismatch(&labels, &letters, "which is no run of it");
    }
    assert!(lane.store.snapshot().records.is_empty());
}

/// A chain's trigger keyed outside its key space would put its run and its steps where a
/// job's runs (or another chain's) are: poison, before any record.
#[tokio::test(start_paused = true)]
async fn a_chain_trigger_keyed_outside_its_key_space_is_poison() {
    let lane = lane();
    let mut trigger = Envelope::new("month-end", "2026-11-30T06:00:00Z".parse().unwrap());
    trigger.key = Some("q4".into());
    let (labels, letters) = lane.decide(&[trigger.to_json()]).await;
    assert_eq!(labels, ["dead-lettered"], "{letters:?}");
    assert_eq!(text(&letters[0], attr::REASON), "poison");
    assert!(text(&letters[0], attr::ERROR).contains("lies outside its key space"));
    assert!(lane.store.snapshot().records.is_empty());
}
