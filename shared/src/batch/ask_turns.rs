//! A worker's runs arriving at a gate together ask it in turn: no more takes in flight
//! than the gate may have permits free, as this worker knows it.
//!
//! Why: the runs a receive brings arrive within a millisecond of each other, before any
//! knows what the gate holds, and each used to ask it with a write of its own. Under a
//! shared limit of 4 on LocalStack (three pollers, ten messages in hand each, `make
//! bench-flow`), 51 of the 61 takes at the start were refused; over five tenants' limits
//! of 2, 98 of 190 takes were refused, 0.33 DynamoDB requests a run that bought nothing.
//! A run now waits for a turn to ask: while this worker's takes in flight are as many as
//! the permits that may be free (none seen: the limit less the permits held here; the gate
//! read or answered less than [`super::gate_looks::FRESH`] ago: its free permits), it waits
//! for one of them to be answered, and then decides as any arriving run does, from what
//! that answer showed (a refusal's answer is kept as a view of the gate for that, as of
//! when its take was sent). A gate seen full is no write for a run that then waits in
//! hand or watches; one that would come first in the line asks the gate anyway, at once.
//!
//! Only when a run asks is moved, never what it is told: the take is the same write,
//! decided by the same rules. Only runs arriving take turns: a run that waited before, or
//! holds another gate's permit, asks as it did. A turn is waited for at most
//! [`TURN_AT_MOST`]: a write held up (throttled, retried) does not hold the runs behind it
//! past that, they ask anyway. Its costs: a run may wait up to that long more (within
//! its wait for the permit, not counted against `max_wait_seconds`), and a permit this
//! worker passes on while its runs wait for turns is given back, not passed (they are not
//! yet waiting in hand), and taken again by one of them: a write more.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// The longest a run waits for its turn to ask a gate.
const TURN_AT_MOST: Duration = Duration::from_secs(1);

/// This worker's takes in flight, by gate.
#[derive(Debug, Default)]
pub(crate) struct AskTurns {
    asking: Mutex<HashMap<String, usize>>,
    answered: Notify,
}

/// A run's turn to ask a gate: given up when dropped (its take answered).
#[derive(Debug)]
pub(crate) struct AskTurn {
    turns: Arc<AskTurns>,
    item: String,
}

impl AskTurns {
    /// Waits for a turn to ask the gate `item`: `may_ask` says how many takes may be in
    /// flight at once, as the gate is known when the turn is looked for (asked again each
    /// time one is answered); none, when no take would be written (the run decides from
    /// what is known, and waits in hand), so it goes at once.
    pub async fn turn(self: &Arc<Self>, item: &str, may_ask: impl Fn() -> usize) -> AskTurn {
        let give_up = Instant::now() + TURN_AT_MOST;
        loop {
            let answered = self.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            {
                let mut asking = self.asking();
                let now = asking.get(item).copied().unwrap_or(0);
                let may = may_ask();
                if may == 0 || now < may || Instant::now() >= give_up {
                    *asking.entry(item.to_string()).or_default() += 1;
                    return AskTurn {
                        turns: self.clone(),
                        item: item.to_string(),
                    };
                }
            }
            let _ = tokio::time::timeout_at(give_up, answered).await;
        }
    }

    /// How many of this worker's takes of `item` are in flight.
    #[cfg(test)]
    fn in_flight(&self, item: &str) -> usize {
        self.asking().get(item).copied().unwrap_or(0)
    }

    fn asking(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.asking.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for AskTurn {
    fn drop(&mut self) {
        {
            let mut asking = self.turns.asking();
            if let Some(n) = asking.get_mut(&self.item) {
                *n -= 1;
                if *n == 0 {
                    asking.remove(&self.item);
                }
            }
        }
        self.turns.answered.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_run_waits_for_a_turn_while_as_many_asks_as_may_be_free_are_in_flight() {
        let turns = Arc::new(AskTurns::default());
        let first = turns.turn("g", || 1).await;
        let waiting = {
            let turns = turns.clone();
            tokio::spawn(async move { turns.turn("g", || 1).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !waiting.is_finished(),
            "a second ask went while one was in flight"
        );
        // Another gate's ask does not wait for this one's.
        let other = turns.turn("h", || 1).await;
        assert_eq!(turns.in_flight("h"), 1);
        drop(other);
        drop(first);
        let second = waiting.await.unwrap();
        assert_eq!(turns.in_flight("g"), 1);
        drop(second);
        assert_eq!(turns.in_flight("g"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_is_waited_for_a_second_at_most() {
        let turns = Arc::new(AskTurns::default());
        let _held = turns.turn("g", || 1).await;
        let before = Instant::now();
        let _late = turns.turn("g", || 1).await;
        assert_eq!(before.elapsed(), TURN_AT_MOST);
        assert_eq!(turns.in_flight("g"), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn as_many_ask_at_once_as_the_gate_may_have_free() {
        let turns = Arc::new(AskTurns::default());
        let a = turns.turn("g", || 3).await;
        let b = turns.turn("g", || 3).await;
        let c = turns.turn("g", || 3).await;
        assert_eq!(turns.in_flight("g"), 3);
        drop((a, b, c));
    }
}
