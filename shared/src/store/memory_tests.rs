//! The memory store's transitions, each against what the DynamoDB store does (its
//! conditions, its answers to a lost answer's retry); `tests/tests/store_contract.rs` runs
//! the same calls on both stores.

use std::sync::Mutex;

use super::*;
use crate::store::{AttemptOutcome, Redrive};

/// Faults scripted in order: the first entry naming a request applies to it, once.
#[derive(Debug, Default)]
struct Script(Mutex<Vec<(&'static str, Fault)>>);

impl Faults for Script {
    fn request(&self, request: &'static str, _: &str) -> (Duration, Fault) {
        let mut script = self.0.lock().unwrap();
        match script.iter().position(|(name, _)| *name == request) {
            Some(i) => (Duration::ZERO, script.remove(i).1),
            None => (Duration::ZERO, Fault::None),
        }
    }
}

fn scripted(faults: Vec<(&'static str, Fault)>) -> MemoryStore {
    MemoryStore::new(Arc::new(Script(Mutex::new(faults))))
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn req(key: &str, owner: &str, now: &str) -> ClaimRequest {
    ClaimRequest {
        key: key.into(),
        job: "j".into(),
        scheduled_for: "2026-12-01T12:00:00Z".into(),
        payload_hash: "h".into(),
        input: "{}".into(),
        message_id: Some(format!("m-{owner}")),
        owner: owner.into(),
        now: at(now),
        lease: Duration::from_secs(60),
        retention: Duration::from_secs(3600),
        redrive: None,
    }
}

fn claimed(outcome: ClaimOutcome) -> ExecutionRecord {
    match outcome {
        ClaimOutcome::Claimed { record, .. } => record,
        other => panic!("not claimed: {other:?}"),
    }
}

fn effect() -> Vec<TransactWriteItem> {
    vec![TransactWriteItem::builder().build()]
}

#[tokio::test]
async fn a_live_lease_keeps_others_out_and_an_expired_one_is_taken_over_and_fenced() {
    let store = MemoryStore::default();
    let a = claimed(
        store
            .claim(&req("k", "a", "2026-12-01T12:00:00Z"))
            .await
            .unwrap(),
    );
    let b = store
        .claim(&req("k", "b", "2026-12-01T12:00:30Z"))
        .await
        .unwrap();
    assert!(matches!(b, ClaimOutcome::InProgress(_)), "{b:?}");
    store
        .heartbeat(
            "k",
            "a",
            at("2026-12-01T12:00:30Z"),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let b = store
        .claim(&req("k", "b", "2026-12-01T12:01:10Z"))
        .await
        .unwrap();
    assert!(matches!(b, ClaimOutcome::InProgress(_)), "renewed: {b:?}");
    let b = claimed(
        store
            .claim(&req("k", "b", "2026-12-01T12:01:31Z"))
            .await
            .unwrap(),
    );
    assert_eq!((b.attempt, b.history.len()), (2, 1));
    assert_eq!(b.history[0].outcome, AttemptOutcome::LeaseExpired);
    let late = store
        .finish(
            &a,
            &Finish::Succeeded {
                result: serde_json::json!(1),
            },
            at("2026-12-01T12:01:40Z"),
        )
        .await;
    assert!(
        matches!(late, Err(TransitionError::LeaseLost { .. })),
        "{late:?}"
    );
    let late = store
        .heartbeat(
            "k",
            "a",
            at("2026-12-01T12:01:40Z"),
            Duration::from_secs(60),
        )
        .await;
    assert!(matches!(late, Err(TransitionError::LeaseLost { .. })));
}

#[tokio::test]
async fn a_decided_run_answers_duplicates_and_conflicts() {
    let store = MemoryStore::default();
    let a = claimed(
        store
            .claim(&req("k", "a", "2026-12-01T12:00:00Z"))
            .await
            .unwrap(),
    );
    let done = store
        .finish(
            &a,
            &Finish::Succeeded {
                result: serde_json::json!(1),
            },
            at("2026-12-01T12:00:01Z"),
        )
        .await
        .unwrap();
    assert_eq!(done.status, Status::Done);
    let again = store
        .claim(&req("k", "b", "2026-12-01T12:05:00Z"))
        .await
        .unwrap();
    assert!(matches!(again, ClaimOutcome::Duplicate(_)), "{again:?}");
    let other = ClaimRequest {
        payload_hash: "other".into(),
        ..req("k", "b", "2026-12-01T12:05:00Z")
    };
    let conflict = store.claim(&other).await.unwrap();
    assert!(
        matches!(conflict, ClaimOutcome::Conflict(_)),
        "{conflict:?}"
    );
}

#[tokio::test]
async fn a_failed_run_is_claimed_again_only_by_a_redrive_of_another_message() {
    let store = MemoryStore::default();
    let a = claimed(
        store
            .claim(&req("k", "a", "2026-12-01T12:00:00Z"))
            .await
            .unwrap(),
    );
    let failed = store
        .finish(
            &a,
            &Finish::Failed { error: "no".into() },
            at("2026-12-01T12:00:01Z"),
        )
        .await
        .unwrap();
    let same = store
        .claim(&req("k", "a", "2026-12-01T12:00:02Z"))
        .await
        .unwrap();
    assert!(matches!(same, ClaimOutcome::AlreadyFailed(_)), "{same:?}");
    let plain = store
        .claim(&req("k", "b", "2026-12-01T12:00:02Z"))
        .await
        .unwrap();
    assert!(matches!(plain, ClaimOutcome::Duplicate(_)), "{plain:?}");
    let redrive = ClaimRequest {
        redrive: Some(Redrive {
            failed_at: failed.finished_at.clone(),
        }),
        ..req("k", "c", "2026-12-01T12:10:00Z")
    };
    let round2 = claimed(store.claim(&redrive).await.unwrap());
    assert_eq!((round2.attempt, round2.round_attempt()), (2, 1));
}

#[tokio::test]
async fn a_finish_whose_answer_was_lost_is_applied_once_and_its_retry_answered() {
    let store = scripted(vec![("finish", Fault::LoseAnswer)]);
    let a = claimed(
        store
            .claim(&req("k", "a", "2026-12-01T12:00:00Z"))
            .await
            .unwrap(),
    );
    let finish = Finish::Succeeded {
        result: serde_json::json!(1),
    };
    let now = at("2026-12-01T12:00:01Z");
    let lost = store.finish(&a, &finish, now).await;
    assert!(matches!(
        lost,
        Err(TransitionError::Store(StoreError::Unavailable(_)))
    ));
    assert_eq!(
        store.snapshot().records["k"].status,
        Status::Done,
        "applied"
    );
    let retried = store.finish(&a, &finish, now).await.unwrap();
    assert_eq!(retried.status, Status::Done);
}

#[tokio::test]
async fn effects_commit_with_the_outcome_once_and_never_after_the_lease() {
    let store = scripted(vec![
        ("commit", Fault::LoseAnswer),
        ("commit", Fault::Unavailable),
    ]);
    let a = claimed(
        store
            .claim(&req("k", "a", "2026-12-01T12:00:00Z"))
            .await
            .unwrap(),
    );
    let now = at("2026-12-01T12:00:10Z");
    let lost = store.commit(&a, serde_json::json!(1), now, effect()).await;
    assert!(matches!(lost, Err(CommitError::Store(_))), "{lost:?}");
    let refused = store.commit(&a, serde_json::json!(1), now, effect()).await;
    assert!(matches!(refused, Err(CommitError::Store(_))), "{refused:?}");
    let done = store
        .commit(&a, serde_json::json!(1), now, effect())
        .await
        .unwrap();
    assert_eq!(done.status, Status::Done);
    let state = store.snapshot();
    assert_eq!(
        state.puts().filter(|(run, _)| *run == "k").count(),
        1,
        "applied once"
    );

    let b = claimed(
        store
            .claim(&req("k2", "b", "2026-12-01T12:00:00Z"))
            .await
            .unwrap(),
    );
    let past = at("2026-12-01T12:01:00Z");
    let late = store.commit(&b, serde_json::json!(1), past, effect()).await;
    assert!(
        matches!(late, Err(CommitError::LeaseLost { .. })),
        "{late:?}"
    );
    assert!(!store.snapshot().puts().any(|(run, _)| run == "k2"));
}

fn entry<'a>(key: &'a str, owner: &'a str, policy: Overlap, now: &str) -> SlotEntry<'a> {
    SlotEntry {
        job: "j",
        key,
        owner,
        policy,
        now: at(now),
        hold: Duration::from_secs(120),
    }
}

#[tokio::test]
async fn a_slot_is_held_by_a_running_run_only_and_skips_or_queues_one_waiter() {
    let store = MemoryStore::default();
    let t0 = "2026-12-01T12:00:00Z";
    claimed(store.claim(&req("a", "oa", t0)).await.unwrap());
    assert_eq!(
        store
            .enter_slot(entry("a", "oa", Overlap::Skip, t0))
            .await
            .unwrap(),
        Gate::Open
    );
    let b = store
        .enter_slot(entry("b", "ob", Overlap::Skip, t0))
        .await
        .unwrap();
    assert_eq!(
        b,
        Gate::Skip {
            running: "a".into()
        }
    );
    let b = store
        .enter_slot(entry("b", "ob", Overlap::BufferOne, t0))
        .await
        .unwrap();
    assert!(matches!(b, Gate::Wait { .. }), "{b:?}");
    let c = store
        .enter_slot(entry("c", "oc", Overlap::BufferOne, t0))
        .await
        .unwrap();
    assert_eq!(
        c,
        Gate::Skip {
            running: "a".into()
        }
    );
    // The holder's lease ran out (60 s): its slot is taken over.
    let later = "2026-12-01T12:01:30Z";
    let d = store
        .enter_slot(entry("d", "od", Overlap::Skip, later))
        .await
        .unwrap();
    assert_eq!(d, Gate::Open);
    store.leave_slot("j", "a", "oa").await.unwrap();
    assert_eq!(
        store.snapshot().slots["j"].holder.as_deref(),
        Some("d"),
        "not a's to leave"
    );
    store.leave_slot("j", "d", "o-late").await.unwrap();
    assert_eq!(
        store.snapshot().slots["j"].holder.as_deref(),
        Some("d"),
        "a late leave of another entry of d's"
    );
    store.leave_slot("j", "d", "od").await.unwrap();
    assert_eq!(store.snapshot().slots["j"].holder, None);
}

#[tokio::test]
async fn a_streak_counts_each_run_once_up_to_its_cap_and_clears_what_it_read() {
    let store = MemoryStore::default();
    let count = |key: &'static str| {
        let store = store.clone();
        async move {
            store
                .count_failure("j", key, 2, chrono::Utc::now())
                .await
                .unwrap()
        }
    };
    assert_eq!(count("k1").await, 1);
    assert_eq!(count("k1").await, 1);
    assert_eq!(count("k2").await, 2);
    assert_eq!(count("k3").await, 2);
    store.clear_failures("j").await.unwrap();
    assert_eq!(count("k4").await, 1);
}

#[tokio::test]
async fn a_chain_run_ends_only_by_its_own_execution() {
    let store = MemoryStore::default();
    let start = ClaimRequest {
        job: "close".into(),
        owner: "exec-1".into(),
        ..req("chain-key", "exec-1", "2026-12-01T12:00:00Z")
    };
    assert_eq!(store.start_chain(&start).await.unwrap(), None);
    assert!(
        store.start_chain(&start).await.unwrap().is_some(),
        "started once"
    );
    let now = at("2026-12-01T12:00:05Z");
    let other = store
        .end_chain("chain-key", "close", "exec-2", &ChainEnd::Done, now)
        .await;
    assert!(matches!(other, Ok(Err(Some(_)))), "{other:?}");
    let wrong_chain = store
        .end_chain("chain-key", "other", "exec-1", &ChainEnd::Done, now)
        .await;
    assert!(matches!(wrong_chain, Ok(Err(Some(_)))));
    store
        .end_chain("chain-key", "close", "exec-1", &ChainEnd::Done, now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.snapshot().records["chain-key"].status, Status::Done);
    let again = store
        .end_chain("chain-key", "close", "exec-1", &ChainEnd::Done, now)
        .await;
    assert!(matches!(again, Ok(Err(Some(_)))), "ended already");
}

/// Issue 38, defect 2: a cancelled holder's body runs on until its next heartbeat is
/// refused (a quarter of its lease at most), so its permit is not handed on while its lease
/// lasts, as its overlap slot is not (`attempt_may_run`). Taken from a cancelled holder, a
/// limit of 1 let two bodies run at once.
#[tokio::test]
async fn a_cancelled_holder_keeps_its_permit_while_its_attempt_may_still_run() {
    let store = MemoryStore::new(Arc::new(NoFaults));
    let permit = |key: &'static str, owner: &'static str, now: &str| PermitRequest {
        share: "",
        priority: 0,
        since_ms: None,
        item: ".schedkit/concurrency/export/a",
        key,
        owner,
        concurrency: Some(1),
        spacing: None,
        now: at(now),
        lease: Duration::from_secs(60),
        skew: Duration::from_secs(1),
    };
    claimed(
        store
            .claim(&req("a", "w:1", "2026-12-01T12:00:00Z"))
            .await
            .unwrap(),
    );
    let first = permit("a", "w:1", "2026-12-01T12:00:00Z");
    assert_eq!(store.take_permit(&first).await.unwrap(), Permit::Taken);
    // Its heartbeat keeps the lease (to 12:01:50); the gate's hint stays at 12:01:00.
    store
        .heartbeat(
            "a",
            "w:1",
            at("2026-12-01T12:00:50Z"),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    store
        .cancel(&crate::store::CancelRequest {
            key: "a".into(),
            by: "alice".into(),
            reason: "wrong input".into(),
            now: at("2026-12-01T12:01:05Z"),
            only: vec![],
            arrived: None,
        })
        .await
        .unwrap();
    claimed(
        store
            .claim(&req("b", "w:2", "2026-12-01T12:01:06Z"))
            .await
            .unwrap(),
    );
    // The hint passed, so the waiter looks at the holder's record: CANCELLED, but under a
    // lease that still runs, so its body may still be executing.
    let waiter = permit("b", "w:2", "2026-12-01T12:01:10Z");
    let refused = store.take_permit(&waiter).await.unwrap();
    assert!(
        matches!(&refused, Permit::Full { holders, .. } if holders == &["a"]),
        "handed on while the cancelled attempt may still run: {refused:?}"
    );
    // Past its lease and the skew bound, it surely stopped: the permit is handed on.
    let later = permit("b", "w:2", "2026-12-01T12:01:51.001Z");
    assert_eq!(store.take_permit(&later).await.unwrap(), Permit::Taken);
}

/// A take-over of a slot whose holder's lease ran out, applied, its answer lost and sent
/// again by the SDK: the second try is refused by the first, which holds the slot now.
/// The run entered (it was SKIPPED as held by itself, and never ran).
#[tokio::test]
async fn a_take_over_refused_by_its_own_first_try_enters() {
    let store = scripted(vec![("enter_slot.take_over", Fault::Retried)]);
    let t0 = "2026-12-01T12:00:00Z";
    claimed(store.claim(&req("a", "oa", t0)).await.unwrap());
    assert_eq!(
        store
            .enter_slot(entry("a", "oa", Overlap::Skip, t0))
            .await
            .unwrap(),
        Gate::Open
    );
    let later = "2026-12-01T12:01:30Z";
    let d = store
        .enter_slot(entry("d", "od", Overlap::Skip, later))
        .await
        .unwrap();
    assert_eq!(d, Gate::Open);
    assert_eq!(store.snapshot().slots["j"].holder.as_deref(), Some("d"));
}
