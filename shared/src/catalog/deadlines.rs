//! When a run must be DONE: its job's (or chain's) `deadline`, counted from its scheduled
//! time (`deadline = "45m"`), or for a scheduled one that gives none, the longest its retry
//! policy can take: every attempt used up to its time budget, every retry delay at the top
//! of its band, the schedule's flexible window, and a margin for the scheduler and the
//! queue. A run still not DONE by then is late; a firing with no run at all by then is
//! missed (the accountant's reading).

use std::time::Duration;

use super::model::{JobSpec, Settings};
use crate::job::JobPolicy;

/// What a default deadline allows beyond the retry policy's worst case: the scheduler's
/// delivery and the queue's wait before a worker takes the message.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(5 * 60);

/// `deadline` as written (`45m`, `2h`, `1h30m`), or why it is not one.
pub fn parse(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("must be longer than 0".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(format!(
            "`{text}` is not a duration like \"45m\" or \"2h\": {e}"
        )),
    }
}

/// The longest one attempt may take: its timeout, else its lease.
pub fn attempt_budget(policy: &JobPolicy) -> Duration {
    policy.timeout.unwrap_or(policy.lease)
}

/// [`attempt_budget`] as the job's table writes it (before its policy is built): its
/// timeout, where it runs deciding it when it gives none (as its policy has it).
pub(super) fn spec_attempt_budget(spec: &JobSpec, settings: &Settings) -> Duration {
    Duration::from_secs(u64::from(spec.timeout(settings)))
}

/// The longest a run of `policy` can take to end, retries included.
pub fn worst_case(policy: &JobPolicy) -> Duration {
    let attempts = policy.retry.max_attempts.max(1);
    let running = attempt_budget(policy).saturating_mul(attempts);
    (1..attempts).fold(running, |total, failed| {
        total + policy.retry.nominal_delay(failed)
    })
}

/// The flexible window of a job's or chain's schedule, as written.
pub(super) fn window(minutes: Option<u32>) -> Duration {
    Duration::from_secs(u64::from(minutes.unwrap_or(0)) * 60)
}

/// Why `deadline` cannot be a job's whose one attempt may take `budget` and whose
/// schedule may deliver `window` after its time: it is not a duration, or it is shorter
/// than the window and that attempt (a run on time would be reported late).
pub fn check_with_window(
    text: &str,
    budget: Duration,
    window: Duration,
) -> Result<Duration, String> {
    let deadline = check(text, budget)?;
    if !window.is_zero() && deadline < window + budget {
        return Err(format!(
            "{} is shorter than the schedule's flexible window and one attempt ({}): a run the scheduler delivers late in its window would be late",
            humantime::format_duration(deadline),
            humantime::format_duration(window + budget)
        ));
    }
    Ok(deadline)
}

/// Why `deadline` cannot be a job's whose one attempt may take `budget`: it is not a
/// duration, or it is shorter than that attempt (every run would be reported late).
pub fn check(text: &str, budget: Duration) -> Result<Duration, String> {
    let deadline = parse(text)?;
    if deadline < budget {
        return Err(format!(
            "{} is shorter than one attempt ({}, its timeout): every run would be late",
            humantime::format_duration(deadline),
            humantime::format_duration(budget)
        ));
    }
    Ok(deadline)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::RetryPolicy;

    #[test]
    fn the_worst_case_is_every_attempt_and_every_delay_at_its_top() {
        let policy = JobPolicy {
            retry: RetryPolicy {
                max_attempts: 3,
                first_delay: Duration::from_secs(5),
                base_delay: Duration::from_secs(60),
                max_delay: Duration::from_secs(600),
            },
            ..JobPolicy::default().with_lease(Duration::from_secs(30))
        };
        // 3 attempts of 30 s, then delays of 5 s and 60 s.
        assert_eq!(worst_case(&policy), Duration::from_secs(3 * 30 + 5 + 60));
        assert_eq!(
            check("45m", Duration::from_secs(60)),
            Ok(Duration::from_secs(2700))
        );
        assert!(
            check("30s", Duration::from_secs(60))
                .unwrap_err()
                .contains("shorter than one attempt")
        );
        assert!(
            check("0s", Duration::from_secs(1))
                .unwrap_err()
                .contains("longer than 0")
        );
        let hour = Duration::from_secs(3600);
        assert!(
            check_with_window("30m", Duration::from_secs(60), hour)
                .unwrap_err()
                .contains("shorter than the schedule's flexible window and one attempt (1h 1m)")
        );
        assert_eq!(
            check_with_window("2h", Duration::from_secs(60), hour),
            Ok(2 * hour)
        );
        assert!(
            check("soon", Duration::from_secs(1))
                .unwrap_err()
                .contains("not a duration")
        );
    }
}
