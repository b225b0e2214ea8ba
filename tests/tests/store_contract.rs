//! The memory store answers as DynamoDB does: the same calls, made through the
//! `ExecutionStore` interface on the DynamoDB store (LocalStack) and on the memory store,
//! give the same answers and leave the same records. The worker's logic is tested over the
//! memory store (unit and simulation tests); this is what entitles those tests to speak
//! for DynamoDB.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use chrono::{DateTime, Utc};
use schedkit::Status;
use schedkit::job::Overlap;
use schedkit::store::{
    CancelError, CancelRequest, Cancelled, ChainEnd, ClaimOutcome, ClaimRequest, CommitError,
    ExecutionRecord, ExecutionStore, Finish, MemoryStore, OperatorNote, PauseRecord, PauseStore,
    Pauses, Redrive, SlotEntry, TransitionError,
};
use schedkit_testkit::{Stack, StackOptions, unique};

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// A record as far as both stores must agree (list shard and open status are DynamoDB's
/// index attributes; the rest is the record).
fn record(r: &ExecutionRecord) -> String {
    let history: Vec<String> = r
        .history
        .iter()
        .map(|h| format!("{}:{}:{:?}", h.attempt, h.owner, h.outcome))
        .collect();
    format!(
        "{} attempt {} (round {}) owner {:?} lease {:?} finished {:?} error {:?} result {:?} cancelled {:?} history {history:?}",
        r.status,
        r.attempt,
        r.round_attempt(),
        r.owner,
        r.lease_expires_at,
        r.finished_at,
        r.last_error,
        r.result,
        r.cancelled,
    )
}

fn claim(outcome: &ClaimOutcome) -> String {
    match outcome {
        ClaimOutcome::Claimed { record: r, before } => format!(
            "claimed: {} / before: {:?}",
            record(r),
            before.as_deref().map(record)
        ),
        ClaimOutcome::Duplicate(r) => format!("duplicate: {}", record(r)),
        ClaimOutcome::InProgress(r) => format!("in progress: {}", record(r)),
        ClaimOutcome::Conflict(r) => format!("conflict: {}", record(r)),
        ClaimOutcome::AlreadyFailed(r) => format!("already failed: {}", record(r)),
        ClaimOutcome::Cancelled(r) => format!("cancelled: {}", record(r)),
    }
}

fn transition<T>(result: &Result<T, TransitionError>, ok: impl Fn(&T) -> String) -> String {
    match result {
        Ok(v) => format!("ok: {}", ok(v)),
        Err(TransitionError::LeaseLost { current }) => {
            format!("lease lost: {:?}", current.as_deref().map(record))
        }
        Err(TransitionError::Store(e)) => format!("store error: {e}"),
    }
}

/// The script, on one store (its execution records and its pause records); every answer
/// and the records it leaves, in order.
async fn script(
    store: &dyn ExecutionStore,
    pauses: &dyn PauseStore,
    p: &str,
    effect_table: &str,
) -> Vec<String> {
    let mut log = Vec::new();
    let key = |k: &str| format!("{p}-{k}");
    let job = format!("{p}-job");
    let req = |k: &str, owner: &str, now: &str| ClaimRequest {
        key: key(k),
        job: job.clone(),
        scheduled_for: "2026-12-01T12:00:00Z".into(),
        payload_hash: "h".into(),
        input: "{\"job\":\"x\"}".into(),
        message_id: Some(format!("m-{owner}")),
        owner: format!("{p}-{owner}"),
        now: at(now),
        lease: Duration::from_secs(60),
        retention: Duration::from_secs(3600),
        redrive: None,
    };
    let owner = |o: &str| format!("{p}-{o}");
    let lease = Duration::from_secs(60);
    let done = Finish::Succeeded {
        result: serde_json::json!({"rows": 3}),
    };

    // Leases: a live one keeps others out, heartbeats renew it, an expired one is taken
    // over and its owner fenced.
    let a = store
        .claim(&req("run", "a", "2026-12-01T12:00:00Z"))
        .await
        .unwrap();
    log.push(claim(&a));
    let ClaimOutcome::Claimed { record: a, .. } = a else {
        panic!("{log:?}")
    };
    log.push(claim(
        &store
            .claim(&req("run", "b", "2026-12-01T12:00:30Z"))
            .await
            .unwrap(),
    ));
    let beat = store
        .heartbeat(&key("run"), &owner("a"), at("2026-12-01T12:00:30Z"), lease)
        .await;
    log.push(transition(&beat, |_| String::new()));
    log.push(claim(
        &store
            .claim(&req("run", "b", "2026-12-01T12:01:10Z"))
            .await
            .unwrap(),
    ));
    let b = store
        .claim(&req("run", "b", "2026-12-01T12:01:31Z"))
        .await
        .unwrap();
    log.push(claim(&b));
    let ClaimOutcome::Claimed { record: b, .. } = b else {
        panic!("{log:?}")
    };
    let late = store.finish(&a, &done, at("2026-12-01T12:01:40Z")).await;
    log.push(transition(&late, record));
    let late = store
        .heartbeat(&key("run"), &owner("a"), at("2026-12-01T12:01:40Z"), lease)
        .await;
    log.push(transition(&late, |_| String::new()));
    let finished = store.finish(&b, &done, at("2026-12-01T12:01:45Z")).await;
    log.push(transition(&finished, record));
    // The same finish again (a lost answer's retry) is answered from the record.
    let again = store.finish(&b, &done, at("2026-12-01T12:01:45Z")).await;
    log.push(transition(&again, record));
    log.push(claim(
        &store
            .claim(&req("run", "c", "2026-12-01T12:05:00Z"))
            .await
            .unwrap(),
    ));
    let other = ClaimRequest {
        payload_hash: "other".into(),
        ..req("run", "c", "2026-12-01T12:05:00Z")
    };
    log.push(claim(&store.claim(&other).await.unwrap()));

    // A round that fails, retries, fails for good, and a redrive of it.
    let f = store
        .claim(&req("failing", "a", "2026-12-01T13:00:00Z"))
        .await
        .unwrap();
    log.push(claim(&f));
    let ClaimOutcome::Claimed { record: f, .. } = f else {
        panic!("{log:?}")
    };
    let retrying = Finish::Retrying {
        error: "flaky".into(),
    };
    let r = store
        .finish(&f, &retrying, at("2026-12-01T13:00:01Z"))
        .await;
    log.push(transition(&r, record));
    let f2 = store
        .claim(&req("failing", "b", "2026-12-01T13:00:05Z"))
        .await
        .unwrap();
    log.push(claim(&f2));
    let ClaimOutcome::Claimed { record: f2, .. } = f2 else {
        panic!("{log:?}")
    };
    let failed = Finish::Failed {
        error: "for good".into(),
    };
    let r = store.finish(&f2, &failed, at("2026-12-01T13:00:06Z")).await;
    log.push(transition(&r, record));
    let finished_at = r.ok().and_then(|r| r.finished_at);
    log.push(claim(
        &store
            .claim(&req("failing", "b", "2026-12-01T13:00:07Z"))
            .await
            .unwrap(),
    ));
    log.push(claim(
        &store
            .claim(&req("failing", "c", "2026-12-01T13:00:07Z"))
            .await
            .unwrap(),
    ));
    let redrive = |owner: &str, failed_at: Option<String>| ClaimRequest {
        redrive: Some(Redrive { failed_at }),
        ..req("failing", owner, "2026-12-01T14:00:00Z")
    };
    let early = redrive("d", Some("2026-12-01T13:00:05.000Z".into()));
    log.push(claim(&store.claim(&early).await.unwrap()));
    log.push(claim(
        &store.claim(&redrive("d", finished_at)).await.unwrap(),
    ));

    // Effects: committed with the outcome while the lease is live, never after it.
    let put = |k: &str| {
        let item = Put::builder()
            .table_name(effect_table)
            .item("effect_key", AttributeValue::S(key(k)))
            .build()
            .unwrap();
        vec![TransactWriteItem::builder().put(item).build()]
    };
    for (k, commit_at) in [
        ("effect", "2026-12-01T15:00:10Z"),
        ("late", "2026-12-01T15:01:00Z"),
    ] {
        let c = store
            .claim(&req(k, "a", "2026-12-01T15:00:00Z"))
            .await
            .unwrap();
        let ClaimOutcome::Claimed { record: c, .. } = c else {
            panic!("{log:?}")
        };
        let committed = store
            .commit(&c, serde_json::json!(1), at(commit_at), put(k))
            .await;
        log.push(match committed {
            Ok(r) => format!("committed: {}", record(&r)),
            Err(CommitError::LeaseLost { current }) => {
                format!("commit refused: {:?}", current.as_deref().map(record))
            }
            Err(e) => format!("commit failed: {e}"),
        });
        log.push(format!(
            "{:?}",
            store.get(&key(k)).await.unwrap().as_ref().map(record)
        ));
    }

    // Overlap: a slot held by a running run skips or queues one waiter; a holder whose
    // lease ran out is taken over; only the holder leaves.
    let t0 = "2026-12-01T16:00:00Z";
    store.claim(&req("holder", "h", t0)).await.unwrap();
    store
        .claim(&req("fourth", "f", "2026-12-01T16:01:30Z"))
        .await
        .unwrap();
    let (fifth_key, fifth_owner) = (key("fifth"), owner("v"));
    let entry = |k: &'static str, o: &'static str, policy: Overlap, now: &'static str| {
        (key(k), owner(o), policy, now)
    };
    for (k, o, policy, now) in [
        entry("holder", "h", Overlap::Skip, t0),
        entry("second", "s", Overlap::Skip, t0),
        entry("second", "s", Overlap::BufferOne, t0),
        entry("third", "t", Overlap::BufferOne, t0),
        entry("fourth", "f", Overlap::Skip, "2026-12-01T16:01:30Z"),
    ] {
        let gate = store
            .enter_slot(SlotEntry {
                job: &job,
                key: &k,
                owner: &o,
                policy,
                now: at(now),
                hold: Duration::from_secs(120),
            })
            .await
            .unwrap();
        log.push(format!("{k}: {gate:?}").replace(p, "P"));
    }
    // Only the entry's own leave frees it: not the former holder's, not a late leave of
    // an earlier entry of the same run (another claim's owner).
    store
        .leave_slot(&job, &key("holder"), &owner("h"))
        .await
        .unwrap();
    store
        .leave_slot(&job, &key("fourth"), &owner("x"))
        .await
        .unwrap();
    let fifth = |now: &'static str| SlotEntry {
        job: &job,
        key: &fifth_key,
        owner: &fifth_owner,
        policy: Overlap::Skip,
        now: at(now),
        hold: Duration::from_secs(120),
    };
    let held = store
        .enter_slot(fifth("2026-12-01T16:01:40Z"))
        .await
        .unwrap();
    log.push(format!("after others' leaves: {held:?}").replace(p, "P"));
    store
        .leave_slot(&job, &key("fourth"), &owner("f"))
        .await
        .unwrap();
    let after = store
        .enter_slot(fifth("2026-12-01T16:02:00Z"))
        .await
        .unwrap();
    log.push(format!("after leaving: {after:?}"));

    // Permits: a gate holds as many runs as its limit; a holder whose lease has run out
    // (beyond the skew bound) is dropped by the next taker, a live one is not; only its
    // own claim gives a permit back; a rate spaces starts.
    let gate = format!(".schedkit/concurrency/{p}/t");
    let paced = format!(".schedkit/limit/{p}-paced");
    let t1 = "2026-12-01T17:00:00Z";
    for (k, o) in [("p1", "p1"), ("p2", "p2"), ("p3", "p3")] {
        store.claim(&req(k, o, t1)).await.unwrap();
    }
    let permit = |k: &str, o: &str, item: &str, now: &str, spacing: Option<u64>| {
        let (k, o, item, now) = (key(k), owner(o), item.to_string(), at(now));
        async move {
            let taken = store
                .take_permit(schedkit::store::PermitRequest {
                    share: "s",
                    priority: 0,
                    since_ms: None,
                    item: &item,
                    key: &k,
                    owner: &o,
                    concurrency: spacing.is_none().then_some(2),
                    spacing: spacing.map(Duration::from_secs),
                    now,
                    lease,
                    skew: Duration::from_secs(1),
                })
                .await
                .unwrap();
            format!("{k} at {now}: {taken:?}")
        }
    };
    log.push(permit("p1", "p1", &gate, t1, None).await);
    log.push(permit("p2", "p2", &gate, t1, None).await);
    log.push(permit("p3", "p3", &gate, t1, None).await);
    log.push(permit("p1", "p1", &gate, "2026-12-01T17:00:05Z", None).await);
    // p2's lease runs out at 17:01:00; p1 heartbeats.
    store
        .heartbeat(&key("p1"), &owner("p1"), at("2026-12-01T17:00:50Z"), lease)
        .await
        .unwrap();
    log.push(permit("p3", "p3", &gate, "2026-12-01T17:01:00.500Z", None).await);
    log.push(permit("p3", "p3", &gate, "2026-12-01T17:01:01.500Z", None).await);
    store
        .release_permit(&gate, &key("p1"), &owner("other"))
        .await
        .unwrap();
    log.push(permit("p2", "p2", &gate, "2026-12-01T17:01:02Z", None).await);
    store
        .release_permit(&gate, &key("p1"), &owner("p1"))
        .await
        .unwrap();
    log.push(permit("p2", "p2", &gate, "2026-12-01T17:01:03Z", None).await);
    // A claim that lost its run (taken over once its lease ran out) never takes the
    // permit from the claim that holds the run now, however late its take lands; the
    // current claim replaces an entry the lost one left.
    let stale_gate = format!(".schedkit/concurrency/{p}/stale");
    store.claim(&req("q", "old", t1)).await.unwrap();
    store
        .claim(&req("q", "new", "2026-12-01T17:01:01Z"))
        .await
        .unwrap();
    log.push(permit("q", "old", &stale_gate, "2026-12-01T17:00:01Z", None).await);
    log.push(permit("q", "new", &stale_gate, "2026-12-01T17:01:02Z", None).await);
    log.push(permit("q", "old", &stale_gate, "2026-12-01T17:01:03Z", None).await);
    log.push(permit("p1", "p1", &paced, t1, Some(2)).await);
    log.push(permit("p2", "p2", &paced, "2026-12-01T17:00:01Z", Some(2)).await);
    log.push(permit("p2", "p2", &paced, "2026-12-01T17:00:02Z", Some(2)).await);
    // The line: a run a full gate refuses parks (creating the line, then joining it); a
    // newcomer waits behind it even when a permit frees; the release answers the gate as
    // it left it, the permit is handed on to the waiter that comes first, and that run's
    // take replaces the reservation, saying since when it waited.
    let lined = format!(".schedkit/concurrency/{p}/line");
    let t2 = "2026-12-01T18:00:00Z";
    for k in ["l1", "l2", "l3", "l4"] {
        store.claim(&req(k, k, t2)).await.unwrap();
    }
    let take = |k: &str, now: &str| {
        let (k, item, now) = (key(k), lined.clone(), at(now));
        async move {
            let taken = store
                .take_permit(schedkit::store::PermitRequest {
                    share: "s",
                    priority: 0,
                    since_ms: None,
                    item: &item,
                    key: &k,
                    owner: &owner(&k.replace(&format!("{p}-"), "")),
                    concurrency: Some(1),
                    spacing: None,
                    now,
                    lease,
                    skew: Duration::from_secs(1),
                })
                .await
                .unwrap();
            format!("take {k} at {now}: {taken:?}")
        }
    };
    let line_of = |g: &schedkit::store::GateItem| {
        let holders: Vec<&String> = g.holders.keys().collect();
        let waiters: Vec<&String> = g.waiters.keys().collect();
        format!("holders {holders:?} waiters {waiters:?}").replace(p, "P")
    };
    let t2_ms = at(t2).timestamp_millis();
    let park = |k: &str, since: i64, map: bool| {
        let (k, item) = (key(k), lined.clone());
        async move {
            let waiter = schedkit::store::Waiter {
                since_ms: since,
                priority: 0,
                share: k.clone(),
                handle: format!("handle-{k}"),
                until_ms: since + 30_000,
            };
            let req = schedkit::store::ParkRequest {
                item: &item,
                key: &k,
                limit: 1,
                waiter,
                now_ms: since,
            };
            let parked = match store.park(req, map).await.unwrap() {
                schedkit::store::Parked::Waiting(g) => format!("waiting {}", line_of(&g)),
                other => format!("{other:?}"),
            };
            format!("park {k}: {parked}")
        }
    };
    log.push(take("l1", t2).await);
    log.push(take("l2", t2).await);
    log.push(park("l2", t2_ms + 1, false).await);
    log.push(park("l3", t2_ms + 2, false).await);
    log.push(park("l3", t2_ms + 2, true).await);
    let released = store
        .release_permit(&lined, &key("l1"), &owner("l1"))
        .await
        .unwrap();
    log.push(format!("released: {}", line_of(&released)));
    log.push(take("l4", "2026-12-01T18:00:01Z").await);
    let now_ms = at("2026-12-01T18:00:02Z").timestamp_millis();
    let (next, waiter) = schedkit::store::next_waiter(&released, now_ms).unwrap();
    let handed = store
        .hand_on(schedkit::store::HandOn {
            item: &lined,
            key: next,
            waiter,
            limit: 1,
            now_ms,
            served: schedkit::store::served_after(&released, &waiter.share, now_ms),
        })
        .await
        .unwrap();
    let handed = match handed {
        Ok(g) => format!("handed {}", line_of(&g)),
        Err(g) => format!("refused {}", line_of(&g)),
    };
    log.push(format!("handed on to {next}: {handed}").replace(p, "P"));
    log.push(take("l3", "2026-12-01T18:00:03Z").await);
    log.push(take("l2", "2026-12-01T18:00:03Z").await);
    // A full line: a quiet share's run takes the place of the busy share's newest waiter;
    // the busy share's next run finds no place.
    let crowd = format!("{lined}-crowd");
    let crowd_park = |k: String, share: &str, since: i64, map: bool| {
        let (item, share) = (crowd.clone(), share.to_string());
        async move {
            let waiter = schedkit::store::Waiter {
                since_ms: since,
                priority: 0,
                share,
                handle: format!("handle-{k}"),
                until_ms: since + 30_000,
            };
            let req = schedkit::store::ParkRequest {
                item: &item,
                key: &k,
                limit: 1,
                waiter,
                now_ms: since,
            };
            store.park(req, map).await.unwrap()
        }
    };
    store
        .take_permit(schedkit::store::PermitRequest {
            share: "a",
            priority: 0,
            since_ms: None,
            item: &crowd,
            key: &key("c-held"),
            owner: &owner("c-held"),
            concurrency: Some(1),
            spacing: None,
            now: at(t2),
            lease,
            skew: Duration::from_secs(1),
        })
        .await
        .unwrap();
    for i in 0..schedkit::store::MOST_WAITERS as i64 {
        crowd_park(key(&format!("c-a{i:02}")), "a", t2_ms + i, i > 0).await;
    }
    let quiet = crowd_park(key("c-b"), "b", t2_ms + 100, true).await;
    let busy = crowd_park(key("c-a-late"), "a", t2_ms + 101, true).await;
    let summary = |parked: &schedkit::store::Parked| match parked {
        schedkit::store::Parked::Waiting(g) => {
            let mut shares: BTreeMap<&str, usize> = BTreeMap::new();
            for w in g.waiters.values() {
                *shares.entry(w.share.as_str()).or_default() += 1;
            }
            let last = format!("{}-c-a63", p);
            format!(
                "waiting {shares:?}, a63 in line: {}",
                g.waiters.contains_key(&last)
            )
        }
        other => format!("{other:?}"),
    };
    log.push(format!("full line, quiet share: {}", summary(&quiet)));
    log.push(format!("full line, busy share: {}", summary(&busy)));
    // Passing in hand: the holder's entry becomes the waiting run's while the line is
    // empty; not another claim's entry, and not past a run waiting in the line.
    let passed_gate = format!("{lined}-pass");
    let entry = |k: &str| schedkit::store::Holder {
        owner: owner(k),
        until_ms: t2_ms + 60_000,
        share: "s".into(),
        then: None,
    };
    store
        .take_permit(schedkit::store::PermitRequest {
            share: "s",
            priority: 0,
            since_ms: None,
            item: &passed_gate,
            key: &key("h1"),
            owner: &owner("h1"),
            concurrency: Some(1),
            spacing: None,
            now: at(t2),
            lease,
            skew: Duration::from_secs(1),
        })
        .await
        .unwrap();
    let pass = |from: &str, by: &str, to: &str| {
        let (item, from, by, to, held) = (
            passed_gate.clone(),
            key(from),
            owner(by),
            key(to),
            entry(to),
        );
        async move {
            let p = schedkit::store::Pass {
                item: &item,
                limit: 1,
                from: (&from, &by),
                to: (&to, &held),
                promote: false,
            };
            match store.pass_permit(p).await.unwrap() {
                Ok(g) => format!(
                    "pass {from} to {to}: passed, holders {:?}",
                    g.holders.keys().collect::<Vec<_>>()
                ),
                Err(g) => format!(
                    "pass {from} to {to}: refused, holders {:?}",
                    g.holders.keys().collect::<Vec<_>>()
                ),
            }
        }
    };
    log.push(pass("h1", "h1", "h2").await);
    log.push(pass("h1", "h1", "h3").await);
    log.push(pass("h2", "someone-else", "h3").await);
    let waiter = schedkit::store::Waiter {
        since_ms: t2_ms,
        priority: 0,
        share: "s".into(),
        handle: "handle-h9".into(),
        until_ms: t2_ms + 30_000,
    };
    let parked = store
        .park(
            schedkit::store::ParkRequest {
                item: &passed_gate,
                key: &key("h9"),
                limit: 1,
                waiter,
                now_ms: t2_ms,
            },
            false,
        )
        .await
        .unwrap();
    log.push(format!(
        "pass: parked h9: {}",
        matches!(parked, schedkit::store::Parked::Waiting(_))
    ));
    log.push(pass("h2", "h2", "h3").await);
    // A pass may name the run the permit goes to next; the write moving the entry to that
    // run's name is not refused for a line, and names another next only with no line.
    let named = format!("{lined}-next");
    let next = |k: &str| schedkit::store::Next {
        key: key(k),
        owner: owner(k),
    };
    store
        .take_permit(schedkit::store::PermitRequest {
            share: "s",
            priority: 0,
            since_ms: None,
            item: &named,
            key: &key("n1"),
            owner: &owner("n1"),
            concurrency: Some(1),
            spacing: None,
            now: at(t2),
            lease,
            skew: Duration::from_secs(1),
        })
        .await
        .unwrap();
    let move_entry = |from: &str, to: &str, then: Option<&str>, promote: bool| {
        let (item, from_key, by, to_key) = (named.clone(), key(from), owner(from), key(to));
        let mut held = entry(to);
        held.then = then.map(next);
        let (from, to, then) = (from.to_string(), to.to_string(), then.map(str::to_string));
        async move {
            let p = schedkit::store::Pass {
                item: &item,
                limit: 1,
                from: (&from_key, &by),
                to: (&to_key, &held),
                promote,
            };
            let what = if promote { "move" } else { "pass" };
            let (done, g) = match store.pass_permit(p).await.unwrap() {
                Ok(g) => ("done", g),
                Err(g) => ("refused", g),
            };
            let holders: Vec<_> = g
                .holders
                .iter()
                .map(|(k, h)| (k.clone(), h.then.as_ref().map(|n| n.key.clone())))
                .collect();
            format!("next: {what} {from} to {to} naming {then:?}: {done}, holders {holders:?}")
        }
    };
    log.push(move_entry("n1", "n2", Some("n3"), false).await);
    // Not the run named next: refused.
    log.push(move_entry("n2", "n4", None, true).await);
    log.push(move_entry("n2", "n3", Some("n4"), true).await);
    let waiter = schedkit::store::Waiter {
        since_ms: t2_ms,
        priority: 0,
        share: "s".into(),
        handle: "handle-n9".into(),
        until_ms: t2_ms + 30_000,
    };
    store
        .park(
            schedkit::store::ParkRequest {
                item: &named,
                key: &key("n9"),
                limit: 1,
                waiter,
                now_ms: t2_ms,
            },
            false,
        )
        .await
        .unwrap();
    // With a run in the line: moved, but naming no next of its own.
    log.push(move_entry("n3", "n4", Some("n5"), true).await);
    log.push(move_entry("n3", "n4", None, true).await);
    // A worker's looks: gates read together, each as it is (a gate never written as an
    // empty one); a take from a read decides from it, with no write while it shows the gate
    // full, and the write refuses a read that showed room the gate no longer has.
    let never = format!("{lined}-never");
    let items = vec![gate.clone(), passed_gate.clone(), never.clone()];
    let read = store.read_gates(&items).await.unwrap();
    for (item, g) in &read {
        log.push(format!("read {item}: {g:?}"));
    }
    let seen_take = |k: &str, item: &str, seen: schedkit::store::GateItem| {
        let (k, item) = (key(k), item.to_string());
        async move {
            let req = schedkit::store::PermitRequest {
                share: "s",
                priority: 0,
                since_ms: None,
                item: &item,
                key: &k,
                owner: &owner("seen"),
                concurrency: Some(1),
                spacing: None,
                now: at(t2),
                lease,
                skew: Duration::from_secs(1),
            };
            let taken = store.take_permit_seen(req, seen).await.unwrap();
            format!("{k} from a read of {item}: {taken:?}")
        }
    };
    log.push(seen_take("h4", &passed_gate, read[&passed_gate].clone()).await);
    log.push(seen_take("h5", &never, read[&never].clone()).await);
    log.push(seen_take("h6", &never, read[&never].clone()).await);
    let again = store.read_gates(&items).await.unwrap();
    log.push(format!(
        "read again: {:?}",
        again.values().map(|g| g.holders.len()).collect::<Vec<_>>()
    ));
    for line in log.iter_mut() {
        *line = line.replace(p, "P");
    }

    // Failure streaks.
    for k in ["s1", "s1", "s2", "s3"] {
        let n = store
            .count_failure(&job, &key(k), "x", 2, at("2026-12-01T15:00:00Z"))
            .await
            .unwrap();
        log.push(format!("streak after {k}: {n}"));
    }
    store.clear_failures(&job).await.unwrap();
    let n = store
        .count_failure(&job, &key("s4"), "x", 2, at("2026-12-01T15:00:00Z"))
        .await
        .unwrap();
    log.push(format!("streak after clearing: {n}"));

    // Pauses: an automatic one needs its streak, none overwrites another, a resume ends
    // the pause and forgets the streak.
    let pause = |by: &str| PauseRecord {
        job: job.clone(),
        by: by.into(),
        at: "2026-12-01T16:00:00Z".into(),
        reason: format!("paused by {by}"),
    };
    log.push(format!(
        "unpaused: {:?}",
        pauses.pause_of(&job).await.unwrap()
    ));
    log.push(format!(
        "auto, streak 1 of 2: {:?}",
        pauses
            .pause_after_streak(&pause("worker"), 2)
            .await
            .unwrap()
    ));
    store
        .count_failure(&job, &key("s5"), "x", 2, at("2026-12-01T15:00:00Z"))
        .await
        .unwrap();
    log.push(format!(
        "auto, streak 2 of 2: {:?}",
        pauses
            .pause_after_streak(&pause("worker"), 2)
            .await
            .unwrap()
    ));
    log.push(format!(
        "operator over it: {:?}",
        pauses.pause(&pause("ops")).await.unwrap()
    ));
    log.push(format!(
        "paused: {:?}",
        pauses.pause_of(&job).await.unwrap()
    ));
    log.push(format!(
        "resumed: {:?}",
        pauses
            .resume(&job, at("2026-12-01T16:30:00Z"))
            .await
            .unwrap()
    ));
    log.push(format!(
        "auto after the resume: {:?}",
        pauses
            .pause_after_streak(&pause("worker"), 1)
            .await
            .unwrap()
    ));
    log.push(format!(
        "operator: {:?}",
        pauses.pause(&pause("ops")).await.unwrap()
    ));
    log.push(format!(
        "auto over it: {:?}",
        pauses
            .pause_after_streak(&pause("worker"), 1)
            .await
            .unwrap()
    ));
    log.push(format!(
        "resumed: {:?}",
        pauses
            .resume(&job, at("2026-12-01T16:30:00Z"))
            .await
            .unwrap()
    ));
    log.push(format!(
        "resumed again: {:?}",
        pauses
            .resume(&job, at("2026-12-01T16:30:00Z"))
            .await
            .unwrap()
    ));
    for (k, failed_at) in [
        ("s6", "2026-12-01T16:00:00Z"),
        ("s7", "2026-12-01T17:00:00Z"),
    ] {
        let n = store
            .count_failure(&job, &key(k), "x", 2, at(failed_at))
            .await
            .unwrap();
        log.push(format!(
            "after the resume, {k} failed at {failed_at}: streak {n}"
        ));
    }

    // An operator's cancellation: a running run's owner is fenced out and a later claim
    // answered cancelled; a finished run, a missing key, a status moved on are refused; a
    // queued run without a record is written CANCELLED from its message.
    let cancel = |k: &str, only: Vec<Status>, arrived: Option<ClaimRequest>| CancelRequest {
        key: key(k),
        by: "ops".into(),
        reason: "a bad deploy".into(),
        now: at("2026-12-01T18:00:00Z"),
        only,
        arrived,
    };
    let cancelled = |r: Result<Cancelled, CancelError>| match r {
        Ok(c) => format!("cancelled (was {}): {}", c.was, record(&c.record)),
        Err(e) => format!("refused: {e}"),
    };
    let ClaimOutcome::Claimed { record: c1, .. } = store
        .claim(&req("c1", "a", "2026-12-01T17:59:50Z"))
        .await
        .unwrap()
    else {
        panic!("{log:?}")
    };
    log.push(cancelled(
        store
            .cancel(&cancel("c1", vec![Status::Retrying], None))
            .await,
    ));
    // A bulk cancel's statuses: a run listed RETRYING, RUNNING again by its cancel.
    let waiting_or_running = vec![Status::Retrying, Status::Running];
    log.push(cancelled(
        store.cancel(&cancel("c1", waiting_or_running, None)).await,
    ));
    let beat = store
        .heartbeat(&key("c1"), &owner("a"), at("2026-12-01T18:00:01Z"), lease)
        .await;
    log.push(transition(&beat, |_| String::new()));
    let late = store.finish(&c1, &done, at("2026-12-01T18:00:02Z")).await;
    log.push(transition(&late, record));
    // The attempt that ran on is written into the cancelled record's history, once, by its
    // own claim only.
    let ran_on = |who: &str| schedkit::store::AttemptEntry {
        attempt: 1,
        owner: owner(who),
        started_at: "2026-12-01T17:59:50.000Z".into(),
        finished_at: "2026-12-01T18:00:02.000Z".into(),
        outcome: schedkit::store::AttemptOutcome::Cancelled,
        error: Some("had run to its end".into()),
        duration_ms: Some(12_000),
        limit_wait: false,
    };
    for (k, who) in [("c1", "b"), ("c1", "a"), ("c1", "a"), ("run", "a")] {
        let noted = store.note_cancelled_attempt(&key(k), &ran_on(who)).await;
        log.push(format!("noted {k} by {who}: {noted:?}"));
    }
    log.push(record(&store.get(&key("c1")).await.unwrap().unwrap()));
    log.push(claim(
        &store
            .claim(&req("c1", "b", "2026-12-01T18:00:03Z"))
            .await
            .unwrap(),
    ));
    log.push(cancelled(store.cancel(&cancel("c1", vec![], None)).await));
    log.push(cancelled(store.cancel(&cancel("run", vec![], None)).await));
    log.push(cancelled(
        store.cancel(&cancel("nothing", vec![], None)).await,
    ));
    let queued = req("c2", "q", "2026-12-01T18:00:00Z");
    log.push(cancelled(
        store
            .cancel(&cancel("c2", vec![], Some(queued.clone())))
            .await,
    ));
    log.push(claim(
        &store
            .claim(&req("c2", "a", "2026-12-01T18:00:04Z"))
            .await
            .unwrap(),
    ));

    // A chain run's start and end.
    let chain = format!("{p}-chain");
    let start = ClaimRequest {
        job: chain.clone(),
        owner: schedkit::key::chain_execution_name(&key("chain-run"), 1),
        ..req("chain-run", "x", "2026-12-01T17:00:00Z")
    };
    log.push(format!(
        "start: {:?}",
        store
            .start_chain(&start)
            .await
            .unwrap()
            .as_ref()
            .map(record)
    ));
    log.push(format!(
        "again: {:?}",
        store
            .start_chain(&start)
            .await
            .unwrap()
            .as_ref()
            .map(record)
    ));
    let now = at("2026-12-01T17:00:05Z");
    let second = schedkit::key::chain_execution_name(&key("chain-run"), 2);
    for (c, execution) in [
        (&chain, &second),
        (&job, &start.owner),
        (&chain, &start.owner),
        (&chain, &start.owner),
    ] {
        let end = store
            .end_chain(&key("chain-run"), c, execution, &ChainEnd::Done, now)
            .await
            .unwrap();
        log.push(format!(
            "end: {:?}",
            end.map_err(|r| r.as_ref().map(record))
        ));
    }
    // An operator's writes to a chain run and its steps: a rerun, a cancellation, a skip
    // and a reopen, each on the record as read, refused once it changed.
    let ops = ClaimRequest {
        job: chain.clone(),
        owner: owner("exec-1"),
        ..req("chain-ops", "x", "2026-12-01T18:00:00Z")
    };
    store.start_chain(&ops).await.unwrap();
    let running = store.get(&key("chain-ops")).await.unwrap().unwrap();
    let stopped = ChainEnd::Paused {
        failed: "step `s` failed".into(),
        stage: "{}".into(),
    };
    let t = at("2026-12-01T18:00:05Z");
    store
        .end_chain(&key("chain-ops"), &chain, &owner("exec-1"), &stopped, t)
        .await
        .unwrap()
        .unwrap();
    let paused = store.get(&key("chain-ops")).await.unwrap().unwrap();
    let t = at("2026-12-01T18:01:00Z");
    for read in [&running, &paused, &paused] {
        let rerun = store.rerun_chain(read, &owner("exec-2"), t).await.unwrap();
        log.push(format!(
            "rerun of the {} run: {:?}",
            read.status,
            rerun.as_ref().map(record)
        ));
    }
    let note = OperatorNote {
        by: "ops".into(),
        at: "2026-12-01T18:02:00Z".into(),
        reason: "not this month".into(),
    };
    let t = at("2026-12-01T18:02:00Z");
    for c in [&job, &chain, &chain] {
        let cancelled = store
            .cancel_chain(&key("chain-ops"), c, &note, t)
            .await
            .unwrap();
        log.push(format!(
            "cancel as a run of {c}: {:?}",
            cancelled
                .as_ref()
                .map(record)
                .map_err(|r| r.as_ref().map(record))
        ));
    }
    let failed_for_good = Finish::Failed {
        error: "partner refused".into(),
    };
    let mut failed_steps = Vec::new();
    for step in ["step-skipped", "step-reopened"] {
        let ClaimOutcome::Claimed { record: c, .. } = store
            .claim(&req(step, "s", "2026-12-01T18:00:00Z"))
            .await
            .unwrap()
        else {
            panic!("{log:?}")
        };
        let failed = store
            .finish(&c, &failed_for_good, at("2026-12-01T18:00:01Z"))
            .await
            .unwrap();
        failed_steps.push((c, failed));
    }
    let t = at("2026-12-01T18:03:00Z");
    let [(skip_running, skip_failed), (reopen_running, reopen_failed)] = &failed_steps[..] else {
        panic!("two steps")
    };
    for read in [skip_running, skip_failed, skip_failed] {
        let skipped = store
            .skip_step(read, "{\"rows\": 0}", &note, t)
            .await
            .unwrap();
        log.push(format!("skip of the {} step: {skipped}", read.status));
    }
    for read in [reopen_running, reopen_failed, reopen_failed] {
        let reopened = store.reopen_step(read, t).await.unwrap();
        log.push(format!("reopen of the {} step: {reopened}", read.status));
    }
    for step in ["chain-ops", "step-skipped", "step-reopened"] {
        let r = store.get(&key(step)).await.unwrap().unwrap();
        log.push(format!(
            "{step}: {} skipped {:?} base {}",
            record(&r),
            r.skipped,
            r.attempt_base
        ));
    }

    // Execution names hash the key, which differs between the two runs.
    log.iter()
        .map(|l| {
            l.replace(&start.owner, "EXECUTION-1")
                .replace(&second, "EXECUTION-2")
                .replace(p, "P")
        })
        .collect()
}

#[tokio::test]
async fn the_memory_store_answers_every_transition_as_dynamodb_does() {
    let stack = Stack::lane("contract", StackOptions::default()).await;
    let dynamo = stack.store();
    let pauses = Pauses::for_table(&schedkit_testkit::localstack().await, &stack.table);
    let on_dynamo = script(&dynamo, &pauses, &unique("c"), &stack.effects_table).await;
    let memory = MemoryStore::default();
    let p = unique("c");
    let on_memory = script(&memory, &memory, &p, &stack.effects_table).await;
    for (i, (d, m)) in on_dynamo.iter().zip(&on_memory).enumerate() {
        assert_eq!(d, m, "step {i} differs (DynamoDB, then memory)");
    }
    assert_eq!(on_dynamo.len(), on_memory.len());
    let first = on_memory
        .iter()
        .position(|l| l.starts_with("P-p1 at"))
        .unwrap();
    let permits: Vec<String> = on_memory[first..first + 14]
        .iter()
        .map(|l| without_answered(l.split_once(": ").unwrap().1))
        .collect();
    assert_eq!(
        permits,
        [
            "Taken",
            "Taken",
            r#"Full { holders: ["P-p1", "P-p2"], line: Line { map: false, waiting: 0, since_ms: None, soonest_until_ms: Some(1796144460000), place: true, others: 0, share_held: 2 } }"#,
            "Taken",
            r#"Full { holders: ["P-p1", "P-p2"], line: Line { map: false, waiting: 0, since_ms: None, soonest_until_ms: Some(1796144460000), place: true, others: 0, share_held: 2 } }"#,
            "Taken",
            r#"Full { holders: ["P-p1", "P-p3"], line: Line { map: false, waiting: 0, since_ms: None, soonest_until_ms: Some(1796144465000), place: true, others: 0, share_held: 2 } }"#,
            "Taken",
            "Taken",
            "Taken",
            r#"Full { holders: ["P-q"], line: Line { map: false, waiting: 0, since_ms: None, soonest_until_ms: Some(1796144522000), place: true, others: 0, share_held: 1 } }"#,
            "Taken",
            "TooSoon { next_start_ms: 1796144402000 }",
            "Taken",
        ],
        "{on_memory:#?}"
    );
    // A take from a read: the gate read full is refused unwritten, the empty one taken,
    // and the same empty read, stale now, refused by the write (one holder each after).
    let from_reads: Vec<&str> = on_memory
        .iter()
        .filter(|l| l.contains(" from a read of ") || l.starts_with("read again"))
        .map(|l| l.split_once(": ").unwrap().1.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        from_reads,
        ["Full", "Taken", "Full", "[1,"],
        "{on_memory:#?}"
    );
    let line: Vec<String> = on_memory
        .iter()
        .filter(|l| {
            ["take P-l", "park ", "released", "handed on"]
                .iter()
                .any(|s| l.starts_with(s))
        })
        .map(|l| without_answered(l))
        .collect();
    assert_eq!(
        line,
        [
            "take P-l1 at 2026-12-01 18:00:00 UTC: Taken",
            r#"take P-l2 at 2026-12-01 18:00:00 UTC: Full { holders: ["P-l1"], line: Line { map: false, waiting: 0, since_ms: None, soonest_until_ms: Some(1796148060000), place: true, others: 0, share_held: 1 } }"#,
            r#"park P-l2: waiting holders ["P-l1"] waiters ["P-l2"]"#,
            r#"park P-l3: waiting holders ["P-l1"] waiters ["P-l2", "P-l3"]"#,
            r#"park P-l3: waiting holders ["P-l1"] waiters ["P-l2", "P-l3"]"#,
            r#"released: holders [] waiters ["P-l2", "P-l3"]"#,
            r#"take P-l4 at 2026-12-01 18:00:01 UTC: Full { holders: [], line: Line { map: true, waiting: 2, since_ms: None, soonest_until_ms: None, place: true, others: 2, share_held: 0 } }"#,
            r#"handed on to P-l2: handed holders ["P-l2"] waiters ["P-l3"]"#,
            r#"take P-l3 at 2026-12-01 18:00:03 UTC: Full { holders: ["P-l2"], line: Line { map: true, waiting: 0, since_ms: Some(1796148000002), soonest_until_ms: Some(1796148017000), place: true, others: 0, share_held: 0 } }"#,
            "take P-l2 at 2026-12-01 18:00:03 UTC: Handed { since_ms: 1796148000001 }",
        ],
        "a newcomer waits behind the line; the permit goes to the first waiter"
    );
    let nexts: Vec<&str> = on_memory
        .iter()
        .filter(|l| l.starts_with("next: "))
        .map(String::as_str)
        .collect();
    assert_eq!(
        nexts,
        [
            r#"next: pass n1 to n2 naming Some("n3"): done, holders [("P-n2", Some("P-n3"))]"#,
            r#"next: move n2 to n4 naming None: refused, holders [("P-n2", Some("P-n3"))]"#,
            r#"next: move n2 to n3 naming Some("n4"): done, holders [("P-n3", Some("P-n4"))]"#,
            r#"next: move n3 to n4 naming Some("n5"): refused, holders [("P-n3", Some("P-n4"))]"#,
            r#"next: move n3 to n4 naming None: done, holders [("P-n4", None)]"#,
        ],
        "a pass names the run after it; the move goes to that run alone, naming another only with no line"
    );
    let passes: Vec<&str> = on_memory
        .iter()
        .filter(|l| l.starts_with("pass"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        passes,
        [
            r#"pass P-h1 to P-h2: passed, holders ["P-h2"]"#,
            r#"pass P-h1 to P-h3: refused, holders ["P-h2"]"#,
            r#"pass P-h2 to P-h3: refused, holders ["P-h2"]"#,
            "pass: parked h9: true",
            r#"pass P-h2 to P-h3: refused, holders ["P-h2"]"#,
        ],
        "a permit passes from its holder's claim while no run waits in the line"
    );
    let full: Vec<&str> = on_memory
        .iter()
        .filter(|l| l.starts_with("full line"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        full,
        [
            r#"full line, quiet share: waiting {"a": 63, "b": 1}, a63 in line: false"#,
            "full line, busy share: Crowded",
        ],
        "a full line gives the busy share's last place up to the quiet share's run"
    );
    assert_eq!(
        memory
            .snapshot()
            .puts()
            .map(|(run, _)| run.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        1,
        "one commit applied its effects"
    );
    let noted: Vec<&str> = on_memory
        .iter()
        .filter(|l| l.starts_with("noted "))
        .map(|l| l.split_once(": ").unwrap().1)
        .collect();
    assert_eq!(noted, ["Ok(false)", "Ok(true)", "Ok(false)", "Ok(false)"]);
    // The operator's writes: each passed once, on the record as read.
    let answers: Vec<&str> = on_memory
        .iter()
        .filter(|l| {
            ["rerun of", "cancel as", "skip of", "reopen of"]
                .iter()
                .any(|w| l.starts_with(w))
        })
        .map(|l| l.split_once(": ").unwrap().1.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        answers,
        [
            "None",
            "Some(\"RUNNING",
            "None",
            "Err(Some(\"RUNNING",
            "Ok(\"RUNNING",
            "Err(Some(\"CANCELLED",
            "false",
            "true",
            "false",
            "false",
            "true",
            "false",
        ],
        "{on_memory:#?}"
    );
}

/// A refusal's line without the gate its write answered (both stores' answers are
/// compared step by step whole; the lists here name what was decided).
fn without_answered(line: &str) -> String {
    match line.split_once(", answered: ") {
        Some((head, _)) => format!("{head} }}"),
        None => line.to_string(),
    }
}
