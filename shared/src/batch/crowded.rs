//! A gate crowded in hand: as many runs of one fair share as the gate's limit already wait
//! in this worker for its permits ([`super::in_hand`], [`super::in_hand_watch`]). The
//! next run of that share, of no higher priority, is sent away to come again at its turn:
//! after the runs waiting here and those sent away before it, one apart at the pace the
//! gate frees permits ([`InHandWaiters::crowded_turn`](super::in_hand_waiters)), at least
//! a second (SQS delays are whole seconds), at most [`PARKED_FOR`]. Received for the
//! first time, the run is claimed and its claim given back, REGISTERED with since when it
//! waits (a record for a cancel to find, as any refused run has), and a copy sent; that
//! copy, crowded again, is sent again unclaimed ([`super::no_place`]).
//!
//! Only a gate with a `fair` key is crowded so: sending a backlog away costs each of its
//! runs a claim given back once and a copy sent at each turn, worth paying to find another
//! key's run the fair share promises a turn to; a gate of one share has none to find (300
//! runs of 50 ms at 2 through three pollers took 12.3 s instead of 8.7 s, at 4.5 requests a
//! run instead of 3.1, when every gate was).
//!
//! Why: runs waiting in hand keep their places in the worker. Without a bound, a backlog of
//! one tenant filled every place of every poller with runs waiting for the same four
//! permits, and nothing received the run another tenant sent behind it (LocalStack, whose
//! queue keeps no fair order: 69 job durations before it started). As many waiting as the
//! limit allows at once are enough to take every permit this worker's runs give back, so
//! the pace is kept; the places left go on receiving, and a run of another share is met
//! and joins the gate's line, first by turn.

use std::time::Duration;

use super::processor::Processor;
use crate::flow::Gate;
use crate::store::PARKED_FOR;

/// A gate crowded in hand, as a run of the crowded share found it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Crowded {
    /// How many runs of its share wait here.
    pub waiting: usize,
    /// When its turn comes, from now.
    pub turn: Duration,
}

impl Crowded {
    /// When the run comes again: at its turn, within the wait its job allows (`left`).
    pub fn look(&self, left: Duration) -> Duration {
        let second = Duration::from_secs(1);
        self.turn.min(PARKED_FOR).min(left).max(second)
    }
}

impl Processor {
    /// Whether the run's fair share crowds `gate` here and the run comes after those that
    /// wait (no higher priority than 0; a run of a higher one goes on, to take its turn
    /// before them). Gives the run a turn: ask only for a run that will be sent away.
    pub(super) fn crowded(&self, gate: &Gate, priority: i32) -> Option<Crowded> {
        let limit = gate.concurrency?;
        if priority > 0 || !gate.fair {
            return None;
        }
        let in_hand = &self.inner.in_hand;
        let (waiting, turn) = in_hand.crowded_turn(&gate.item, &gate.share, limit)?;
        Some(Crowded { waiting, turn })
    }
}

/// The log's reason for a run sent away from a crowded gate.
pub(super) fn crowded_why(gate: &Gate, crowded: &Crowded) -> String {
    format!(
        "{} runs of `{}` wait in hand here for `{}` already, as many as it lets run at once",
        crowded.waiting, gate.share, gate.limit
    )
}
