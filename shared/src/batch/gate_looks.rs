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
//! together, and a run arriving at a gate read less than [`FRESH`] ago decides from that
//! read, not with a write of its own.
//!
//! What a read says is only trusted to say whether a write is worth making: the take that
//! follows is the same conditional write, decided by the same rules
//! ([`crate::store::ExecutionStore::take_permit_seen`]). A read that shows room it no longer
//! has costs a refused write, as before; one that shows full while a permit was freed
//! since is right again within [`FRESH`], at the next look. A read that fails is no look:
//! the run takes without one.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::store::{ExecutionStore, GateItem};

/// How long a look waits for others to be read with it.
const LOOK_GATHER: Duration = Duration::from_millis(5);

/// The most gates one read takes: DynamoDB's `BatchGetItem` takes a hundred keys.
const GATES_PER_READ: usize = 100;

/// How long what a read found is taken for what the gate is, by the runs arriving there:
/// as long as the watchers' looks are apart at most, so the next look corrects it.
pub(crate) const FRESH: Duration = Duration::from_secs(1);

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
    seen: Arc<Mutex<HashMap<String, (Instant, GateItem)>>>,
}

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
        read.await.ok().flatten()
    }

    /// The gate `item` as a look read it less than [`FRESH`] ago, if one did.
    pub fn fresh(&self, item: &str) -> Option<GateItem> {
        let seen = self.seen();
        let (at, gate) = seen.get(item)?;
        (at.elapsed() < FRESH).then(|| gate.clone())
    }

    /// What a write of this worker's run answered the gate `item` is now: taken for a
    /// read of it.
    pub fn saw(&self, item: &str, gate: &GateItem) {
        remember(
            &self.seen,
            &BTreeMap::from([(item.to_string(), gate.clone())]),
        );
    }

    /// Forgets what was read of `item`: a run of this worker changed it (took or gave
    /// back a permit), and a run arriving there must not take the old read for it.
    pub fn forget(&self, item: &str) {
        self.seen().remove(item);
    }

    fn seen(&self) -> MutexGuard<'_, HashMap<String, (Instant, GateItem)>> {
        lock(&self.seen)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads the gates looked at as the looks come, those within [`LOOK_GATHER`] of the
/// first together (each gate once), until every sender is gone.
async fn read_gathered(
    store: Arc<dyn ExecutionStore>,
    mut looks: mpsc::UnboundedReceiver<Look>,
    seen: Arc<Mutex<HashMap<String, (Instant, GateItem)>>>,
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
        let mut items: Vec<String> = asked.iter().map(|(item, _)| item.clone()).collect();
        items.sort();
        items.dedup();
        let read = store.read_gates(&items).await;
        if let Err(e) = &read {
            tracing::warn!(error = %e, gates = items.len(), "could not read the gates watched; their runs take without a look");
        }
        let gates: BTreeMap<String, GateItem> = read.unwrap_or_default();
        remember(&seen, &gates);
        for (item, answer) in asked.drain(..) {
            let _ = answer.send(gates.get(&item).cloned());
        }
    }
}

/// Keeps what was read, forgetting the reads too old to be used once there are many.
fn remember(
    seen: &Mutex<HashMap<String, (Instant, GateItem)>>,
    gates: &BTreeMap<String, GateItem>,
) {
    let now = Instant::now();
    let mut seen = lock(seen);
    if seen.len() > PRUNE_ABOVE {
        seen.retain(|_, (at, _)| now.duration_since(*at) < FRESH);
    }
    for (item, gate) in gates {
        seen.insert(item.clone(), (now, gate.clone()));
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
        assert!(looks.fresh("b").is_some());
        looks.forget("b");
        assert!(looks.fresh("b").is_none(), "forgotten once changed here");
        tokio::time::sleep(FRESH).await;
        assert!(
            looks.fresh("a").is_none(),
            "a read a second old says nothing"
        );
    }
}
