//! What this worker saw of gates' lines lately: refusals that found no place (see
//! [`super::no_place`], which sends the runs after them back unclaimed).

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::time::{Duration, Instant};

/// How long a refusal with no place stands for the runs after it: a line of 64 behind a
/// limit does not drain in a second, and a second later the next look finds out anew.
pub(super) const FRESH: Duration = Duration::from_secs(1);

/// The most (gate, share) pairs remembered: stale ones are forgotten first.
const MOST_NOTED: usize = 1_024;

/// Refusals with no place this worker saw: (gate item, share) → when, and the priority
/// and the since (epoch ms) of the run refused then.
#[derive(Debug, Default)]
pub(crate) struct NoPlace {
    seen: Mutex<HashMap<(String, String), Refused>>,
}

/// The last refusal with no place of a gate's share.
#[derive(Debug, Clone, Copy)]
struct Refused {
    at: Instant,
    priority: i32,
    since_ms: i64,
}

impl NoPlace {
    /// A take of `item` for a run of `share` at `priority`, waiting since `since_ms`, found
    /// no place in its line.
    pub(super) fn note(&self, item: &str, share: &str, priority: i32, since_ms: i64) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let at = Instant::now();
        if seen.len() >= MOST_NOTED {
            seen.retain(|_, r| at.duration_since(r.at) < FRESH);
        }
        let refused = Refused {
            at,
            priority,
            since_ms,
        };
        seen.insert((item.to_string(), share.to_string()), refused);
    }

    /// Whether a run of `share` at `priority`, waiting since `since_ms`, surely has no
    /// place in `item`'s line now: it comes after the run last refused (in the line's
    /// order, a run of one share comes after another by a lower priority, or an equal one
    /// and a later since), and that refusal is fresh.
    pub(super) fn known(&self, item: &str, share: &str, priority: i32, since_ms: i64) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let key = (item.to_string(), share.to_string());
        seen.get(&key).is_some_and(|r| {
            r.at.elapsed() < FRESH
                && (priority < r.priority || (priority == r.priority && since_ms >= r.since_ms))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_refusal_with_no_place_stands_a_second_for_the_runs_that_come_after_it() {
        let seen = NoPlace::default();
        seen.note("gate", "a", 0, 5_000);
        assert!(seen.known("gate", "a", 0, 5_000));
        assert!(seen.known("gate", "a", 0, 9_000), "waiting since later");
        assert!(
            !seen.known("gate", "a", 0, 4_000),
            "waited longer: may have a place"
        );
        assert!(seen.known("gate", "a", -3, 1_000), "a lower priority");
        assert!(
            !seen.known("gate", "a", 1, 9_000),
            "a higher one may take a place"
        );
        assert!(!seen.known("gate", "b", 0, 9_000), "another share may");
        assert!(!seen.known("other", "a", 0, 9_000));
        tokio::time::advance(FRESH).await;
        assert!(
            !seen.known("gate", "a", 0, 9_000),
            "a second later, found out anew"
        );
    }
}
