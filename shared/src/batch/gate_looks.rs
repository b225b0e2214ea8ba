//! A worker's looks at the gates its runs watch, read together: the looks that come
//! within a few milliseconds of each other are one `BatchGetItem` (a hundred gates to a
//! request), and a run takes a permit only when what was read shows one free (or a holder
//! to look at, or a line to join): a gate read full costs no write.
//!
//! Why: a look used to be a take, a conditional write refused while the gate was full.
//! With a limit per tenant (three pollers, five tenants' gates of 2), each poller's runs
//! watched the gates whose permits the other pollers passed from run to run, and 3.5 takes
//! a run were made, 3.1 of them refused: 6.7 DynamoDB requests a run where an unlimited
//! run makes 2. Looks aligned on the same ticks ([`super::in_hand_watch`]) are read
//! together, and a run arriving at a gate seen less than [`FRESH`] ago (read, or answered
//! to this worker's own pass, take or give-back) decides from that whether to wait in
//! hand, not with a write of its own.
//!
//! What a read says is only trusted to say whether a write is worth making, or a run
//! worth waiting in hand: the take that follows is the same conditional write, decided by
//! the same rules ([`crate::store::ExecutionStore::take_permit_seen`]), and a refusal from
//! an earlier read is asked of the gate before the run acts on it otherwise (parks, goes
//! back to the queue). A read that shows room it no longer has costs a refused write, as
//! before; one that shows full while a permit was freed since is right again within
//! [`FRESH`], at the next look. A read that fails, or is not answered within
//! [`LOOK_AT_MOST`], is no look: the run takes without one. A read answered after a newer
//! view of the gate does not replace it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::store::{ExecutionStore, GateItem, Holder};

/// How long a look waits for others to be read with it.
const LOOK_GATHER: Duration = Duration::from_millis(5);

/// The most gates one read takes: DynamoDB's `BatchGetItem` takes a hundred keys.
const GATES_PER_READ: usize = 100;

/// How long what a read (or this worker's own pass or give-back) found is taken for what
/// the gate is, by the runs arriving there: a second, as long as the watchers' looks are
/// apart at most. Only a run that then waits in hand is spared its request by it: a run
/// it would send to the line or back to the queue asks the gate first.
pub(crate) const FRESH: Duration = Duration::from_secs(1);

/// How long a run waits for its look's read before it asks the gate without one: a read
/// held up (throttled, asked again) must not hold the run past its wait in hand.
const LOOK_AT_MOST: Duration = Duration::from_secs(1);

/// Above this many gates remembered, the reads older than [`FRESH`] are forgotten.
const PRUNE_ABOVE: usize = 64;

/// What a take decides from, besides its own write's answer.
#[derive(Debug)]
pub(crate) enum Seen {
    /// The gate as a look read it just now.
    Now(GateItem),
    /// The gate as a look read it a moment ago ([`GateLooks::fresh`]).
    Earlier(GateItem),
}

/// A look asked for: the gate, and where its read goes.
type Look = (String, oneshot::Sender<Option<GateItem>>);

/// The gates read lately, and the task that reads them (started by the first look).
#[derive(Debug, Default)]
pub(crate) struct GateLooks {
    sender: OnceLock<mpsc::UnboundedSender<Look>>,
    seen: Arc<Mutex<Views>>,
}

/// What was seen of each gate, and when the read that saw it was sent.
type Views = HashMap<String, (Instant, GateItem)>;

impl GateLooks {
    /// The gate `item` as it is now, read with the other looks asked for within
    /// [`LOOK_GATHER`] of this one; `None` when the read failed (the run takes without
    /// a look).
    pub async fn look(&self, store: &Arc<dyn ExecutionStore>, item: &str) -> Option<GateItem> {
        let sender = self.sender.get_or_init(|| {
            let (sender, looks) = mpsc::unbounded_channel();
            tokio::spawn(read_gathered(store.clone(), looks, self.seen.clone()));
            sender
        });
        let (answer, read) = oneshot::channel();
        sender.send((item.to_string(), answer)).ok()?;
        match tokio::time::timeout(LOOK_AT_MOST, read).await {
            Ok(read) => read.ok().flatten(),
            Err(_) => None,
        }
    }

    /// The gate `item` as a look read it less than [`FRESH`] ago, if one did.
    pub fn fresh(&self, item: &str) -> Option<GateItem> {
        let seen = self.seen();
        let (at, gate) = seen.get(item)?;
        (at.elapsed() < FRESH).then(|| gate.clone())
    }

    /// How many hold the gate `item` and how many wait in its line, as read less than
    /// [`FRESH`] ago: what a run's turn to ask needs, without a copy of the whole view.
    pub fn fresh_counts(&self, item: &str) -> Option<(usize, usize)> {
        let seen = self.seen();
        let (at, gate) = seen.get(item)?;
        (at.elapsed() < FRESH).then_some((gate.holders.len(), gate.waiters.len()))
    }

    /// What a write of this worker's run answered the gate `item` is now: taken for a
    /// read of it.
    pub fn saw(&self, item: &str, gate: &GateItem) {
        let seen = BTreeMap::from([(item.to_string(), gate.clone())]);
        remember(&self.seen, seen, Instant::now());
    }

    /// What a write this worker sent at `sent` (a refused take) answered the gate `item`
    /// is: a view of it as of when it was sent, so a view saved meanwhile (a give-back's
    /// answer) is not replaced by it (adversary review).
    pub fn answered(&self, item: &str, gate: &GateItem, sent: Instant) {
        let seen = BTreeMap::from([(item.to_string(), gate.clone())]);
        remember(&self.seen, seen, sent);
    }

    /// A run of this worker took a permit of `item` (its entry `holder` under `key`): the
    /// gate as last seen, with it. Only ever one holder more than the gate may have (its
    /// own entry's, taken by the write); a run deciding from it waits in hand, and asks the
    /// gate before it acts otherwise.
    pub fn took(&self, item: &str, key: &str, holder: Holder) {
        if let Some((_, gate)) = self.seen().get_mut(item) {
            gate.waiters.remove(key);
            gate.holders.insert(key.to_string(), holder);
            gate.counted = true;
        }
    }

    fn seen(&self) -> MutexGuard<'_, Views> {
        lock(&self.seen)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads the gates looked at as the looks come, those within [`LOOK_GATHER`] of the
/// first together (each gate once), until every sender is gone. Each read goes on its
/// own: one held up does not hold up the looks after it.
async fn read_gathered(
    store: Arc<dyn ExecutionStore>,
    mut looks: mpsc::UnboundedReceiver<Look>,
    seen: Arc<Mutex<Views>>,
) {
    let mut asked = Vec::new();
    while looks.recv_many(&mut asked, GATES_PER_READ).await > 0 {
        let until = Instant::now() + LOOK_GATHER;
        while asked.len() < GATES_PER_READ {
            let room = GATES_PER_READ - asked.len();
            match tokio::time::timeout_at(until, looks.recv_many(&mut asked, room)).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let asked = std::mem::take(&mut asked);
        tokio::spawn(read_together(store.clone(), asked, seen.clone()));
    }
}

/// One read of the gates `asked` (each once), its answers handed to the looks that asked.
async fn read_together(store: Arc<dyn ExecutionStore>, asked: Vec<Look>, seen: Arc<Mutex<Views>>) {
    let mut items: Vec<String> = asked.iter().map(|(item, _)| item.clone()).collect();
    items.sort();
    items.dedup();
    let sent = Instant::now();
    let read = store.read_gates(&items).await;
    if let Err(e) = &read {
        tracing::warn!(error = %e, gates = items.len(), "could not read the gates watched; their runs take without a look");
    }
    let gates: BTreeMap<String, GateItem> = read.unwrap_or_default();
    remember(&seen, gates.clone(), sent);
    for (item, answer) in asked {
        let _ = answer.send(gates.get(&item).cloned());
    }
}

/// Keeps what was seen at `at`, unless something was seen of the gate later; forgets the
/// views too old to be used once there are many.
fn remember(seen: &Mutex<Views>, views: BTreeMap<String, GateItem>, at: Instant) {
    let now = Instant::now();
    let mut seen = lock(seen);
    if seen.len() > PRUNE_ABOVE {
        seen.retain(|_, (when, _)| now.duration_since(*when) < FRESH);
    }
    for (item, view) in views {
        match seen.get(&item) {
            Some((when, _)) if *when > at => {}
            _ => {
                seen.insert(item, (at, view));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[tokio::test(start_paused = true)]
    async fn looks_asked_together_are_one_read_and_what_it_found_is_fresh_for_a_second() {
        let memory = MemoryStore::default();
        let store: Arc<dyn ExecutionStore> = Arc::new(memory.clone());
        let looks = Arc::new(GateLooks::default());
        let before = memory.snapshot().requests;
        let mut reads = tokio::task::JoinSet::new();
        for item in ["a", "b", "c", "a"] {
            let (looks, store) = (looks.clone(), store.clone());
            reads.spawn(async move { looks.look(&store, item).await });
        }
        let found = reads.join_all().await;
        assert!(
            found
                .iter()
                .all(|g| g.as_ref() == Some(&GateItem::default()))
        );
        assert_eq!(
            memory.snapshot().requests - before,
            1,
            "one read for four looks"
        );
        let holder = Holder {
            owner: "w:1".into(),
            until_ms: 5,
            share: "s".into(),
            then: None,
        };
        looks.took("b", "run", holder.clone());
        let b = looks.fresh("b").expect("read just now");
        assert_eq!(
            b.holders.get("run"),
            Some(&holder),
            "a permit taken here is seen"
        );
        tokio::time::sleep(FRESH).await;
        assert!(
            looks.fresh("a").is_none(),
            "a read a second old says nothing"
        );
    }

    /// Adversary review: a read sent before this worker gave a permit back, and answered
    /// after, put the gate back as full, stamped fresh, for a second.
    #[tokio::test(start_paused = true)]
    async fn a_read_answered_after_a_newer_view_does_not_replace_it() {
        let looks = GateLooks::default();
        let sent = Instant::now();
        tokio::time::sleep(Duration::from_millis(10)).await;
        let given_back = GateItem {
            counted: true,
            ..GateItem::default()
        };
        looks.saw("g", &given_back);
        let full = BTreeMap::from([("g".to_string(), GateItem::default())]);
        remember(&looks.seen, full, sent);
        assert_eq!(looks.fresh("g"), Some(given_back), "the newer view kept");
    }

    /// Adversary review: a take refused, its answer held up (the take then read the
    /// records of holders whose hint had passed), while this worker gave a permit back:
    /// the refusal's answer, stamped when it came, replaced the give-back's view with a
    /// full gate for a second, and the runs arriving then let the free permit stand idle.
    #[tokio::test(start_paused = true)]
    async fn a_refusal_answered_after_a_newer_view_does_not_replace_it() {
        let looks = GateLooks::default();
        let sent = Instant::now();
        tokio::time::sleep(Duration::from_millis(40)).await;
        let given_back = GateItem {
            counted: true,
            ..GateItem::default()
        };
        looks.saw("g", &given_back);
        tokio::time::sleep(Duration::from_millis(20)).await;
        looks.answered("g", &GateItem::default(), sent);
        assert_eq!(looks.fresh("g"), Some(given_back), "the newer view kept");
    }
}
