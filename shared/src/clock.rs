//! The wall clock the worker stamps claims, heartbeats and outcomes with, and the bound on
//! how far two workers' clocks may disagree.
//!
//! Lease expiry is written by the owner's clock and read by a claimer's: a claimer whose
//! clock runs ahead takes over early. The worker stays correct as long as any two workers'
//! clocks differ by at most `DEFAULT_CLOCK_SKEW` (or the bound configured in
//! [`ProcessorConfig::clock_skew`](crate::ProcessorConfig)): an owner cancels its attempt
//! that much before its confirmed lease runs out, so it has stopped before any claimer
//! within the bound can see the lease expired. On AWS, Lambda and EC2 hosts keep time with
//! the Amazon Time Sync Service, within a millisecond; the bound is far wider on purpose.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// How far two workers' wall clocks may disagree, by default.
pub(crate) const DEFAULT_CLOCK_SKEW: Duration = Duration::from_millis(500);

/// A wall clock: the system's, or the system's shifted by a fixed offset (to test what
/// skewed clocks do), or one that follows tokio's clock from a given instant (so that
/// paused time, in unit tests and the simulation, moves it too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    offset_ms: i64,
    /// The instant tokio's clock stood at, and the wall time it stands for.
    follows: Option<(tokio::time::Instant, DateTime<Utc>)>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Clock::default()
    }

    /// The system clock shifted by `offset_ms` (positive: ahead).
    pub fn offset_by_ms(offset_ms: i64) -> Self {
        Clock {
            offset_ms,
            follows: None,
        }
    }

    /// A clock that reads `at` now and moves with tokio's clock from here on.
    pub fn following_tokio(at: DateTime<Utc>) -> Self {
        Clock {
            offset_ms: 0,
            follows: Some((tokio::time::Instant::now(), at)),
        }
    }

    /// The same clock shifted by `offset_ms` more.
    pub fn shifted_by_ms(self, offset_ms: i64) -> Self {
        Clock {
            offset_ms: self.offset_ms + offset_ms,
            ..self
        }
    }

    /// The current time by this clock.
    pub fn now(&self) -> DateTime<Utc> {
        let base = match self.follows {
            Some((then, at)) => {
                let passed = tokio::time::Instant::now().saturating_duration_since(then);
                at + chrono::Duration::from_std(passed).unwrap_or_default()
            }
            None => Utc::now(),
        };
        base + chrono::Duration::milliseconds(self.offset_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_clock_runs_that_far_ahead_of_the_system_clock() {
        let ahead = Clock::offset_by_ms(5_000).now();
        let now = Clock::system().now();
        let diff = (ahead - now).num_milliseconds();
        assert!((4_900..=5_000).contains(&diff), "{diff}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_clock_following_tokio_moves_with_paused_time_only() {
        let at: DateTime<Utc> = "2026-12-02T09:00:00Z".parse().unwrap();
        let clock = Clock::following_tokio(at);
        assert_eq!(clock.now(), at);
        tokio::time::sleep(Duration::from_secs(90)).await;
        assert_eq!(clock.now(), at + chrono::Duration::seconds(90));
        let ahead = clock.shifted_by_ms(250);
        assert_eq!(ahead.now(), at + chrono::Duration::milliseconds(90_250));
    }
}
