//! A fair gate crowded in hand. Runs waiting in hand keep their places in the worker:
//! without a bound, a backlog of one tenant filled every place of every poller with runs
//! waiting for the same four permits, and nothing received the run another tenant sent
//! behind it (LocalStack, whose queue keeps no fair order: 69 job durations before it
//! started; on AWS a fair queue delivers it first).
//!
//! So a worker lets on their way into a gate with a `fair` key (from before their claim
//! until they hold a permit, wait no more, or are sent away) only as many runs of one
//! share as it holds of the gate's permits: one at least, the limit at most
//! ([`InHandWaiters::enter`], checked and counted at once). Each permit given back here
//! has a run to pass it to, so the pace is kept; the other places go on receiving, meet a
//! run of another share and put it in the gate's line, first by turn. The next run of the
//! share, of no higher priority than 0, is sent away to come again at its turn: after the
//! runs on their way and those sent away before it, one hold of a permit apart for each
//! permit this worker holds (a hold is the average of those that ended here, a second
//! before one did), at least a second (SQS delays are whole seconds), at most
//! [`PARKED_FOR`]:
//! - a first delivery, unclaimed: its message hidden until its turn, ten to a request
//!   ([`super::hides`]), none to the table. It has no record yet: to a cancel's scan of
//!   the queue it is a message in a worker's hand, as any received and not yet claimed is
//!   (a cancel of queued runs while workers run the job misses those, for up to 30 s);
//! - a copy sent back after a refusal: sent again unclaimed, its record REGISTERED since
//!   its refusal ([`super::no_place`]);
//! - a first delivery hidden once and back: claimed, and its claim given back
//!   (REGISTERED, a record for a cancel to find) and a copy sent, if crowded still.
//!
//! Measured on LocalStack (`make bench-flow`, a quiet tenant's run sent behind 300 at a
//! fair limit of 4, three pollers of ten places, once the limit is full): claiming each
//! first delivery to give it back scanned the backlog at 25 runs a second and met the run
//! 6.5 to 8.8 s after its send; one hide each, 70 a second, 3.6 to 3.9 s; ten hides to a
//! request, 120 a second, 2.4 to 2.6 s; the bound checked and counted at once (no burst
//! of a whole receive past it), and turns a second a permit before a hold is seen, the
//! backlog is scanned before the run is sent: it started 0.04 to 0.95 s after its send.
//!
//! A gate of one share (no `fair` key) has no other share to find behind a backlog: its
//! runs wait in hand as before.

use std::sync::Arc;
use std::time::Duration;

use super::in_hand_waiters::InHandWaiters;
use super::processor::Processor;
use crate::flow::Gate;
use crate::store::PARKED_FOR;

/// A gate crowded in hand, as a run of the crowded share found it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Crowded {
    /// How many runs of its share are on their way into the gate here.
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

/// A run counted on its way into its fair gate ([`InHandWaiters::enter`]) until dropped:
/// once its entry into its limits ended.
pub(super) struct Entering {
    counted: Option<(Arc<InHandWaiters>, String, String, u64)>,
}

impl Drop for Entering {
    fn drop(&mut self) {
        if let Some((in_hand, item, share, id)) = self.counted.take() {
            in_hand.entered(&item, &share, id);
        }
    }
}

impl Entering {
    /// Nothing counted: a run that is never crowded.
    pub fn none() -> Entering {
        Entering { counted: None }
    }
}

/// The gate a run of `priority` may crowd: its first with a concurrency and a `fair` key,
/// for a run of no higher priority than 0 (a run of a higher one goes on, to take its turn
/// before them). A gate of one share has no other to find behind a backlog: when every
/// gate was crowded, three pollers ran 300 runs of 50 ms at 2 in 12.3 s instead of 8.7 s,
/// at 4.5 requests a run instead of 3.1.
fn crowdable(gate: &Gate, priority: i32) -> Option<u32> {
    let limit = gate.concurrency?;
    (gate.fair && priority <= 0).then_some(limit)
}

impl Processor {
    /// Counts the run on its way into its crowdable gate, or, when it `may_crowd` and the
    /// gate is crowded here, says which and when the run's turn comes.
    pub(super) fn enter_gates<'g>(
        &self,
        gates: &'g [Gate],
        priority: i32,
        may_crowd: bool,
    ) -> Result<Entering, (&'g Gate, Crowded)> {
        let Some((gate, limit)) = gates
            .iter()
            .find_map(|g| crowdable(g, priority).map(|limit| (g, limit)))
        else {
            return Ok(Entering::none());
        };
        let in_hand = &self.inner.in_hand;
        match in_hand.enter(&gate.item, &gate.share, limit, may_crowd) {
            Ok(id) => Ok(Entering {
                counted: Some((in_hand.clone(), gate.item.clone(), gate.share.clone(), id)),
            }),
            Err((waiting, turn)) => Err((gate, Crowded { waiting, turn })),
        }
    }

    /// For a run counted on its way into `gate` already (`entering`): whether those let
    /// in before it crowd it, and its turn if they do. Gives it a turn: ask only for a run
    /// that will be sent away.
    pub(super) fn crowded(
        &self,
        gate: &Gate,
        priority: i32,
        entering: &Entering,
    ) -> Option<Crowded> {
        let limit = crowdable(gate, priority)?;
        let (_, item, share, id) = entering.counted.as_ref()?;
        if *item != gate.item || *share != gate.share {
            return None;
        }
        let in_hand = &self.inner.in_hand;
        let (waiting, turn) = in_hand.crowded_turn(item, share, *id, limit)?;
        Some(Crowded { waiting, turn })
    }
}

/// The log's reason for a run sent away from a crowded gate.
pub(super) fn crowded_why(gate: &Gate, crowded: &Crowded) -> String {
    format!(
        "{} runs of `{}` are on their way into `{}` here already, one per permit this worker holds (one at least)",
        crowded.waiting, gate.share, gate.limit
    )
}
