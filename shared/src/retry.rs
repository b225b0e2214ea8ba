//! Retry policy: how many attempts a job gets and how long a failed message waits.
//!
//! The framework owns retries (job code never loops): a retryable failure hides the message
//! for the backoff delay through `ChangeMessageVisibility` and hands it back to SQS.
//! Default shape follows field practice: a quick retry after a few seconds, then minutes
//! growing exponentially, with jitter so a burst of failures does not retry in lockstep.

use std::time::Duration;

use rand::Rng;

/// SQS refuses visibility timeouts above 12 hours.
pub(crate) const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 60 * 60);

/// Per-job retry settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in one round, the first included. A redrive starts a fresh round.
    pub max_attempts: u32,
    /// Nominal delay after the first failure (the quick retry).
    pub first_delay: Duration,
    /// Nominal delay after the second failure; doubles after each further one.
    pub base_delay: Duration,
    /// Upper bound of the nominal delay.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            first_delay: Duration::from_secs(5),
            base_delay: Duration::from_secs(60),
            max_delay: Duration::from_secs(15 * 60),
        }
    }
}

impl RetryPolicy {
    /// The nominal (un-jittered) delay after attempt `failed` (1-based) failed.
    pub(crate) fn nominal_delay(&self, failed: u32) -> Duration {
        let nominal = match failed {
            0 | 1 => self.first_delay,
            n => {
                let doublings = (n - 2).min(30);
                self.base_delay.saturating_mul(1u32 << doublings)
            }
        };
        nominal.min(self.max_delay).min(MAX_VISIBILITY)
    }

    /// The delay before the next attempt: "equal jitter", uniformly drawn from
    /// `[nominal / 2, nominal]`. Half the delay is kept so delays still grow from one
    /// attempt to the next (the bands of consecutive doublings only touch), and half is
    /// random so a burst of failures spreads out.
    pub(crate) fn delay_after(&self, failed: u32, rng: &mut impl Rng) -> Duration {
        let nominal = self.nominal_delay(failed).as_millis() as u64;
        let half = nominal / 2;
        Duration::from_millis(half + rng.random_range(0..=nominal - half))
    }

    /// Whether attempt `attempt` (1-based, within the round) was the last one allowed.
    pub fn exhausted(&self, attempt: u32) -> bool {
        attempt >= self.max_attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;

    #[test]
    fn nominal_delays_are_quick_then_exponential_then_capped() {
        let p = RetryPolicy::default();
        let secs: Vec<u64> = (1..=7).map(|n| p.nominal_delay(n).as_secs()).collect();
        assert_eq!(secs, [5, 60, 120, 240, 480, 900, 900]);
        assert_eq!(p.nominal_delay(1000), Duration::from_secs(900));
    }

    #[test]
    fn jitter_spreads_a_burst() {
        let p = RetryPolicy::default();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let delays: std::collections::HashSet<_> =
            (0..50).map(|_| p.delay_after(3, &mut rng)).collect();
        assert!(
            delays.len() > 40,
            "50 draws gave only {} distinct delays",
            delays.len()
        );
    }

    proptest! {
        #[test]
        fn delays_stay_in_their_band_and_grow_below_the_cap(
            seed: u64, failed in 1u32..40, first in 1u64..30, base in 1u64..600,
        ) {
            let p = RetryPolicy {
                max_attempts: 50,
                first_delay: Duration::from_secs(first),
                base_delay: Duration::from_secs(base),
                max_delay: Duration::from_secs(3600),
            };
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let this = p.delay_after(failed, &mut rng);
            let next = p.delay_after(failed + 1, &mut rng);
            let nominal = p.nominal_delay(failed);
            prop_assert!(this <= nominal && this >= nominal / 2);
            // Below the cap each band is at least twice the previous one: delays grow.
            if p.nominal_delay(failed + 1) >= nominal * 2 {
                prop_assert!(next >= this, "{next:?} after {this:?}");
            }
        }
    }
}
