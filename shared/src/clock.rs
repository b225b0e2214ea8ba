//! The wall clock the worker stamps claims, heartbeats and outcomes with, and the bound on
//! how far two workers' clocks may disagree.
//!
//! Lease expiry is written by the owner's clock and read by a claimer's: a claimer whose
//! clock runs ahead takes over early. The worker stays correct as long as any two workers'
//! clocks differ by at most [`DEFAULT_CLOCK_SKEW`] (or the bound configured in
//! [`ProcessorConfig::clock_skew`](crate::ProcessorConfig)): an owner cancels its attempt
//! that much before its confirmed lease runs out, so it has stopped before any claimer
//! within the bound can see the lease expired. On AWS, Lambda and EC2 hosts keep time with
//! the Amazon Time Sync Service, within a millisecond; the bound is far wider on purpose.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// How far two workers' wall clocks may disagree, by default.
pub const DEFAULT_CLOCK_SKEW: Duration = Duration::from_millis(500);

/// A wall clock: the system's, or the system's shifted by a fixed offset (to test what
/// skewed clocks do).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    offset_ms: i64,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Clock::default()
    }

    /// The system clock shifted by `offset_ms` (positive: ahead).
    pub fn offset_by_ms(offset_ms: i64) -> Self {
        Clock { offset_ms }
    }

    /// The current time by this clock.
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now() + chrono::Duration::milliseconds(self.offset_ms)
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
}
