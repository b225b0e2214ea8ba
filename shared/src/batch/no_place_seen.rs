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

/// Refusals with no place this worker saw: (gate item, share) → when, and the highest
/// priority refused then.
#[derive(Debug, Default)]
pub(crate) struct NoPlace {
    seen: Mutex<HashMap<(String, String), (Instant, i32)>>,
}

impl NoPlace {
    /// A take of `item` for a run of `share` at `priority` found no place in its line.
    pub(super) fn note(&self, item: &str, share: &str, priority: i32) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if seen.len() >= MOST_NOTED {
            seen.retain(|_, (at, _)| now.duration_since(*at) < FRESH);
        }
        let entry = seen
            .entry((item.to_string(), share.to_string()))
            .or_insert((now, priority));
        let fresh = now.duration_since(entry.0) < FRESH;
        *entry = (
            now,
            if fresh {
                entry.1.max(priority)
            } else {
                priority
            },
        );
    }

    /// Whether a run of `share` at `priority` surely has no place in `item`'s line now.
    pub(super) fn known(&self, item: &str, share: &str, priority: i32) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let key = (item.to_string(), share.to_string());
        seen.get(&key)
            .is_some_and(|(at, refused)| at.elapsed() < FRESH && priority <= *refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_refusal_with_no_place_stands_for_a_second_for_its_share_and_lower_priorities() {
        let seen = NoPlace::default();
        seen.note("gate", "a", 0);
        assert!(seen.known("gate", "a", 0));
        assert!(seen.known("gate", "a", -3), "a lower priority");
        assert!(!seen.known("gate", "a", 1), "a higher one may take a place");
        assert!(!seen.known("gate", "b", 0), "another share may");
        assert!(!seen.known("other", "a", 0));
        tokio::time::advance(FRESH).await;
        assert!(
            !seen.known("gate", "a", 0),
            "a second later, found out anew"
        );
    }
}
