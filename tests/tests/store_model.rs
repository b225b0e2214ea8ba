//! Model-based test of the execution store: random sequences of claim, heartbeat, finish
//! (DONE, RETRYING, FAILED), commit with an effect, lease expiry (time passing), redrive
//! (a claim by another message carrying a dead letter's mark; the first message again is no
//! redrive) and an operator's cancellation at any point (a cancelled run's owner is fenced
//! out, its effect never applied), from three owners whose clocks disagree by up to 300 ms,
//! applied to the real store on LocalStack and to a reference model of a few lines; after
//! every step the outcome, the record and the effect count must agree.
//!
//! CI runs a fixed seed; `SCHEDKIT_MODEL_SEEDS=50 SCHEDKIT_MODEL_STEPS=200` runs more
//! (seeds from 1), e.g. `SCHEDKIT_MODEL_SEEDS=50 cargo test -p schedkit-testkit --test
//! integration store_model`.

use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use schedkit::Status;
use schedkit::store::{
    CancelError, CancelRequest, ClaimOutcome, ClaimRequest, CommitError, DynamoStore,
    ExecutionRecord, Finish, TransitionError,
};
use schedkit_testkit::Stack;
use serde_json::json;

const LEASE_MS: i64 = 1000;
/// The message that is a redrive (a dead letter moved back, carrying its reason).
const REDRIVE: &str = "m2";
/// Each owner's clock, ahead (+) or behind (-) the model's time.
const SKEW_MS: [i64; 3] = [0, 150, -150];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Answer {
    Claimed,
    Duplicate,
    InProgress,
    AlreadyFailed,
    Ok,
    LeaseLost,
    Cancelled,
    Refused,
}

/// The record as the model keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Model {
    status: Status,
    owner: String,
    lease_until: Option<i64>,
    attempt: u32,
    attempt_base: u32,
    message: String,
}

/// One step of a sequence.
#[derive(Debug, Clone)]
enum Step {
    Claim {
        by: usize,
        message: &'static str,
    },
    Heartbeat {
        by: usize,
    },
    Finish {
        by: usize,
        to: Status,
    },
    Commit {
        by: usize,
    },
    Wait {
        ms: i64,
    },
    /// An operator cancels the run (the owner index is only the clock it is read by).
    Cancel {
        by: usize,
    },
}

fn random_step(rng: &mut StdRng) -> Step {
    let by = rng.random_range(0..SKEW_MS.len());
    if rng.random_ratio(1, 25) {
        return Step::Cancel { by };
    }
    match rng.random_range(0..10) {
        0..=2 => Step::Claim {
            by,
            // Mostly the first delivery; sometimes another message, a redrive (`m2` is the
            // dead letter moved back: it carries the letter's mark).
            message: if rng.random_bool(0.8) { "m1" } else { "m2" },
        },
        3 => Step::Heartbeat { by },
        4..=5 => Step::Finish {
            by,
            to: [Status::Done, Status::Retrying, Status::Failed][rng.random_range(0..3)],
        },
        6..=7 => Step::Commit { by },
        _ => Step::Wait {
            ms: rng.random_range(100..1500),
        },
    }
}

/// What the store must do, as the design states it.
fn expect(
    model: &mut Option<Model>,
    applied: &mut i64,
    step: &Step,
    token: &str,
    now: i64,
) -> Answer {
    let ours = |m: &Model| m.status == Status::Running && m.owner == token;
    match *step {
        Step::Claim { message, .. } => {
            let claimable = match model {
                None => true,
                Some(m) => match m.status {
                    Status::Registered | Status::Retrying => true,
                    // Only a redrive reopens a FAILED run, and never the message that failed.
                    Status::Failed => message == REDRIVE && m.message != message,
                    Status::Running => m.lease_until.is_some_and(|l| l < now),
                    Status::Done | Status::Skipped | Status::Paused | Status::Cancelled => false,
                },
            };
            if claimable {
                let (attempt, base) = model
                    .as_ref()
                    .map_or((0, 0), |m| (m.attempt, m.attempt_base));
                *model = Some(Model {
                    status: Status::Running,
                    owner: token.to_string(),
                    lease_until: Some(now + LEASE_MS),
                    attempt: attempt + 1,
                    attempt_base: base,
                    message: message.to_string(),
                });
                return Answer::Claimed;
            }
            match model.as_ref() {
                Some(m) if m.status == Status::Done => Answer::Duplicate,
                Some(m) if m.status == Status::Cancelled => Answer::Cancelled,
                Some(m) if m.status == Status::Failed && m.message == message => {
                    Answer::AlreadyFailed
                }
                Some(m) if m.status == Status::Failed => Answer::Duplicate,
                _ => Answer::InProgress,
            }
        }
        Step::Heartbeat { .. } => match model {
            Some(m) if ours(m) => {
                m.lease_until = Some(now + LEASE_MS);
                Answer::Ok
            }
            _ => Answer::LeaseLost,
        },
        Step::Finish { to, .. } => match model {
            Some(m) if ours(m) => {
                m.status = to;
                m.lease_until = None;
                if to == Status::Failed {
                    m.attempt_base = m.attempt;
                }
                Answer::Ok
            }
            _ => Answer::LeaseLost,
        },
        Step::Commit { .. } => match model {
            Some(m) if ours(m) && m.lease_until.is_some_and(|l| l > now) => {
                m.status = Status::Done;
                m.lease_until = None;
                *applied += 1;
                Answer::Ok
            }
            // Our own commit already applied (a retry that met it): answered as applied.
            Some(m) if m.status == Status::Done && m.owner == token => Answer::Ok,
            _ => Answer::LeaseLost,
        },
        Step::Wait { .. } => Answer::Ok,
        Step::Cancel { .. } => match model {
            Some(m) if schedkit::store::CANCELLABLE.contains(&m.status) => {
                // The lease is kept: the attempt may run until its next heartbeat.
                m.status = Status::Cancelled;
                Answer::Ok
            }
            _ => Answer::Refused,
        },
    }
}

fn effect(table: &str, key: &str) -> TransactWriteItem {
    let update = Update::builder()
        .table_name(table)
        .key("effect_key", AttributeValue::S(key.into()))
        .update_expression("ADD applied :one")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .build()
        .unwrap();
    TransactWriteItem::builder().update(update).build()
}

fn transition<T>(result: Result<T, TransitionError>) -> Answer {
    match result {
        Ok(_) => Answer::Ok,
        Err(TransitionError::LeaseLost { .. }) => Answer::LeaseLost,
        Err(TransitionError::Store(e)) => panic!("store error: {e}"),
    }
}

/// Runs one seeded sequence on a fresh key; panics at the first disagreement. Tallies the
/// answers seen (commits that applied an effect count as `Ok` and in `effects`).
async fn check(
    stack: &Stack,
    store: &DynamoStore,
    seed: u64,
    steps: usize,
    seen: &mut std::collections::BTreeMap<Answer, usize>,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut key = format!("model:{seed}:{}", uuid::Uuid::new_v4());
    let base: DateTime<Utc> = "2026-11-01T00:00:00Z".parse().unwrap();
    let (mut t, mut model, mut applied) = (0i64, None::<Model>, 0i64);
    // Each owner's token and the record its last claim returned.
    let mut claims: Vec<(String, Option<ExecutionRecord>)> = (0..SKEW_MS.len())
        .map(|i| (format!("o{i}:0"), None))
        .collect();
    let mut lives = [0u32; 3];
    for n in 0..steps {
        let step = random_step(&mut rng);
        t += rng.random_range(10..200);
        let by = match step {
            Step::Claim { by, .. }
            | Step::Heartbeat { by }
            | Step::Finish { by, .. }
            | Step::Commit { by }
            | Step::Cancel { by } => by,
            Step::Wait { ms } => {
                t += ms;
                continue;
            }
        };
        // An attempt writes one outcome: finishing or committing again is not a step a
        // worker takes (and a commit's retry must carry the same contents).
        if matches!(step, Step::Finish { .. } | Step::Commit { .. }) && claims[by].1.is_none() {
            continue;
        }
        let now_ms = t + SKEW_MS[by];
        let now = base + chrono::Duration::milliseconds(now_ms);
        // A claim tries a fresh owner token; the owner's other steps use the token of its
        // last claim that won.
        let token = match step {
            Step::Claim { .. } => {
                lives[by] += 1;
                format!("o{by}:{}", lives[by])
            }
            _ => claims[by].0.clone(),
        };
        let want = expect(&mut model, &mut applied, &step, &token, now_ms);
        let got = match step {
            Step::Claim { message, .. } => {
                let req = ClaimRequest {
                    key: key.clone(),
                    job: "model".into(),
                    scheduled_for: "2026-11-01T00:00:00Z".into(),
                    payload_hash: "h".into(),
                    input: "{}".into(),
                    message_id: Some(message.into()),
                    owner: token.clone(),
                    now,
                    lease: Duration::from_millis(LEASE_MS as u64),
                    retention: Duration::from_secs(3600),
                    redrive: (message == REDRIVE)
                        .then_some(schedkit::store::Redrive { failed_at: None }),
                };
                match store.claim(&req).await.unwrap() {
                    ClaimOutcome::Claimed { record: r, .. } => {
                        claims[by] = (token.clone(), Some(r));
                        Answer::Claimed
                    }
                    ClaimOutcome::Duplicate(_) => Answer::Duplicate,
                    ClaimOutcome::InProgress(_) => Answer::InProgress,
                    ClaimOutcome::AlreadyFailed(_) => Answer::AlreadyFailed,
                    ClaimOutcome::Cancelled(_) => Answer::Cancelled,
                    other => panic!("{other:?}"),
                }
            }
            Step::Heartbeat { .. } => transition(
                store
                    .heartbeat(&key, &token, now, Duration::from_millis(LEASE_MS as u64))
                    .await,
            ),
            Step::Finish { to, .. } => {
                let claimed = claims[by].1.take().unwrap();
                let finish = match to {
                    Status::Done => Finish::Succeeded {
                        result: json!({"n": n}),
                    },
                    Status::Retrying => Finish::Retrying {
                        error: format!("step {n}"),
                    },
                    _ => Finish::Failed {
                        error: format!("step {n}"),
                    },
                };
                transition(store.finish(&claimed, &finish, now).await)
            }
            Step::Commit { .. } => {
                let claimed = claims[by].1.take().unwrap();
                let effects = vec![effect(&stack.effects_table, &key)];
                match store.commit(&claimed, json!({"n": n}), now, effects).await {
                    Ok(_) => Answer::Ok,
                    Err(CommitError::LeaseLost { .. }) => Answer::LeaseLost,
                    Err(e) => panic!("commit: {e}"),
                }
            }
            Step::Cancel { .. } => {
                let req = CancelRequest {
                    key: key.clone(),
                    by: "arn:aws:iam::000000000000:user/model".into(),
                    reason: format!("step {n}"),
                    now,
                    only: vec![],
                    arrived: None,
                };
                match store.cancel(&req).await {
                    Ok(_) => Answer::Ok,
                    Err(CancelError::Refused { .. } | CancelError::NotFound { .. }) => {
                        Answer::Refused
                    }
                    Err(e) => panic!("cancel: {e}"),
                }
            }
            Step::Wait { .. } => unreachable!(),
        };
        let context = || {
            format!("seed {seed}, step {n}: {step:?} by {token} at {now_ms} ms; model {model:?}")
        };
        assert_eq!(got, want, "{}", context());
        *seen.entry(got).or_default() += 1;
        let record = store.get(&key).await.unwrap();
        let seen = record.map(|r| {
            (
                r.status,
                r.owner.unwrap_or_default(),
                r.lease_expires_at,
                r.attempt,
                r.attempt_base,
            )
        });
        let modelled = model.as_ref().map(|m| {
            let lease = m
                .lease_until
                .map(|l| (base + chrono::Duration::milliseconds(l)).timestamp_millis());
            (m.status, m.owner.clone(), lease, m.attempt, m.attempt_base)
        });
        assert_eq!(seen, modelled, "{}", context());
        assert_eq!(
            stack.effect_applied(&key).await.unwrap(),
            applied,
            "{}",
            context()
        );
        // A DONE run only answers duplicates from now on; one duplicate more is checked,
        // then the sequence goes on with a new run.
        let over = |m: &Model| matches!(m.status, Status::Done | Status::Cancelled);
        if model.as_ref().is_some_and(over) && matches!(got, Answer::Duplicate | Answer::Cancelled)
        {
            key = format!("model:{seed}:{}", uuid::Uuid::new_v4());
            (model, applied) = (None, 0);
            claims.iter_mut().for_each(|c| c.1 = None);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sequences_from_owners_with_skewed_clocks_agree_with_the_model() {
    let stack = Stack::with_quick_redelivery("model").await;
    let store = stack.store();
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (seeds, steps) = (
        env("SCHEDKIT_MODEL_SEEDS", 3),
        env("SCHEDKIT_MODEL_STEPS", 120),
    );
    let mut seen = std::collections::BTreeMap::new();
    for seed in 1..=seeds {
        check(&stack, &store, seed, steps as usize, &mut seen).await;
    }
    println!("answers over {seeds} sequences of {steps} steps: {seen:?}");
    // The sequences reach every answer: claims won and refused each way, fencing,
    // cancellations done and refused and claims answered cancelled.
    for answer in [
        Answer::Claimed,
        Answer::Duplicate,
        Answer::InProgress,
        Answer::AlreadyFailed,
        Answer::Ok,
        Answer::LeaseLost,
        Answer::Cancelled,
        Answer::Refused,
    ] {
        assert!(
            seen.contains_key(&answer),
            "{answer:?} never came: {seen:?}"
        );
    }
}
