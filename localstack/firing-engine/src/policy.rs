//! The scheduler's delivery rules as pure functions: when to try a firing again, when to
//! give up (and with which of the conditions AWS names on its dead letters), and where in
//! its flexible time window a firing lands.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// What to do after a failed delivery attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Try again after this pause.
    Retry(Duration),
    /// Give up: to the dead-letter queue, with AWS's `EXHAUSTED_RETRY_CONDITION` (None for
    /// an error that no retry can cure, which AWS dead-letters at once).
    DeadLetter(Option<&'static str>),
}

/// The decision after attempt `attempt` (1-based) of a firing first due at `released`
/// (its time, plus its place in its flexible window) failed at `now`.
pub fn after_failure(
    attempt: u32,
    permanent: bool,
    released: DateTime<Utc>,
    now: DateTime<Utc>,
    retry_attempts: u32,
    max_event_age: Duration,
) -> Next {
    if permanent {
        return Next::DeadLetter(None);
    }
    if attempt > retry_attempts {
        return Next::DeadLetter(Some("MaximumRetryAttemptsExceeded"));
    }
    let wait = retry_wait(attempt);
    let age_at_retry = (now - released).to_std().unwrap_or_default() + wait;
    if age_at_retry > max_event_age {
        return Next::DeadLetter(Some("MaximumEventAgeExceeded"));
    }
    Next::Retry(wait)
}

/// The pause after failed attempt `attempt`: doubling from 2 s up to 64 s, like the
/// scheduler's backoff. Fast-forwarding waits the same, in simulated time.
pub fn retry_wait(attempt: u32) -> Duration {
    Duration::from_secs(1 << attempt.clamp(1, 6))
}

/// Where in its flexible window (`window_minutes`, 0: off) the firing of `schedule_arn`
/// scheduled at `scheduled` is delivered: uniform in the window, decided by a hash of the
/// seed and the firing, so engines with one seed agree and a test can fix it.
pub fn window_offset(
    seed: u64,
    schedule_arn: &str,
    scheduled: DateTime<Utc>,
    window_minutes: u32,
) -> Duration {
    if window_minutes == 0 {
        return Duration::ZERO;
    }
    let h = schedkit::hash::stable_hash([
        seed.to_le_bytes().as_slice(),
        schedule_arn.as_bytes(),
        scheduled.timestamp_millis().to_le_bytes().as_slice(),
    ]);
    let window_ms = u64::from(window_minutes) * 60_000;
    Duration::from_millis(h % window_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_permanent_error_is_dead_lettered_at_once() {
        let at = t("2030-06-03T12:00:00Z");
        assert_eq!(
            after_failure(1, true, at, at, 185, Duration::from_secs(86_400)),
            Next::DeadLetter(None)
        );
    }

    #[test]
    fn a_passing_error_is_retried_with_doubling_waits_until_a_limit() {
        let at = t("2030-06-03T12:00:00Z");
        let day = Duration::from_secs(86_400);
        let waits: Vec<Next> = (1..=8)
            .map(|a| after_failure(a, false, at, at, 185, day))
            .collect();
        let secs = [2, 4, 8, 16, 32, 64, 64, 64].map(|s| Next::Retry(Duration::from_secs(s)));
        assert_eq!(waits, secs);
        assert_eq!(
            after_failure(3, false, at, at, 2, day),
            Next::DeadLetter(Some("MaximumRetryAttemptsExceeded")),
            "attempt 3 was the second retry"
        );
        let late = at + chrono::Duration::seconds(3_590);
        assert_eq!(
            after_failure(5, false, at, late, 185, Duration::from_secs(3_600)),
            Next::DeadLetter(Some("MaximumEventAgeExceeded")),
            "the next try (32 s on) would be past the maximum event age"
        );
    }

    #[test]
    fn window_offsets_are_inside_the_window_spread_and_reproducible() {
        let arn = "arn:aws:scheduler:us-east-1:000000000000:schedule/g/report";
        let at = t("2030-06-03T12:00:00Z");
        assert_eq!(window_offset(7, arn, at, 0), Duration::ZERO);
        let offsets: Vec<u64> = (0..200)
            .map(|i| window_offset(7, arn, at + chrono::Duration::hours(i), 10).as_millis() as u64)
            .collect();
        assert!(offsets.iter().all(|&ms| ms < 600_000));
        let early = offsets.iter().filter(|&&ms| ms < 300_000).count();
        assert!(
            (70..=130).contains(&early),
            "{early} of 200 in the first half"
        );
        assert_eq!(
            window_offset(7, arn, at, 10),
            window_offset(7, arn, at, 10),
            "one seed, one offset"
        );
        assert_ne!(window_offset(7, arn, at, 10), window_offset(8, arn, at, 10));
    }
}
