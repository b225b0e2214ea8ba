//! What happened to a message, as one typed event: each writes its log line and its
//! metrics together, so that a transition can never be logged and not counted (or the
//! other way round), and the whole vocabulary of the worker's log is in one `match`.

use super::logging::Transition;
use super::metrics::{Metric, Metrics};

/// One transition of one message (or of its job's streak, or of its chain's run).
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// Dead-lettered without running. `counted_as`: the metrics' job dimension, None
    /// when the letter could not be sent (the message stays, and is not counted).
    Rejected {
        /// The reason and the error, as the log line says them.
        why: &'a str,
        /// The job dimension of the `Rejected` count.
        counted_as: Option<&'a str>,
    },
    /// Too close to the invocation's deadline to start: back at once, nothing claimed.
    Deferred,
    /// A delivery of a decided run, not run again.
    Duplicate {
        /// The run's attempt within its round.
        attempt: u32,
        /// Why it is a duplicate, when that needs saying.
        note: &'a str,
    },
    /// A delivery of a run that FAILED by this very delivery: its letter sent again.
    AlreadyFailed {
        /// The failed round's attempts.
        attempts: u32,
        /// The run's last error.
        error: &'a str,
    },
    /// Another worker holds the run's live lease.
    InProgress {
        /// The run's attempt within its round.
        attempt: u32,
    },
    /// A claimed attempt begins.
    Running {
        /// The attempt within the round.
        attempt: u32,
        /// Milliseconds from the scheduled time to now.
        lag_ms: f64,
    },
    /// The attempt succeeded; its DONE record is written.
    Done {
        /// The attempt within the round.
        attempt: u32,
        /// How long it ran.
        duration_ms: u64,
    },
    /// The attempt failed retryably; RETRYING is written.
    Retrying {
        /// The attempt within the round.
        attempt: u32,
        /// How long it ran.
        duration_ms: u64,
        /// The job's error.
        error: &'a str,
    },
    /// The run failed for good; FAILED is written.
    Failed {
        /// The attempt within the round.
        attempt: u32,
        /// How long it ran.
        duration_ms: u64,
        /// The job's error.
        error: &'a str,
    },
    /// The attempt's outcome was refused: another worker had taken the run over.
    LeaseLost {
        /// The attempt within the round.
        attempt: u32,
        /// How long it ran.
        duration_ms: u64,
        /// The job's error, if it failed.
        error: &'a str,
    },
    /// A claim that was never run was taken over before it could be given back.
    ClaimTakenOver,
    /// The store could not be reached: the message comes back.
    Unavailable {
        /// The attempt within the round; 0 when nothing ran.
        attempt: u32,
        /// How long it ran; 0 when nothing ran.
        duration_ms: u64,
        /// What failed.
        error: &'a str,
    },
    /// Recorded SKIPPED: another run of the job held its overlap slot.
    Skipped {
        /// The key of the run that held it.
        running: &'a str,
    },
    /// An operator cancelled the run: a delivery acknowledged unrun, or an attempt stopped
    /// (its outcome refused by the CANCELLED record).
    Cancelled {
        /// Who cancelled it, and why, as the record says.
        by: &'a str,
        /// Why.
        reason: &'a str,
        /// How an attempt that had begun ended before it learnt (empty: none had, or it
        /// was stopped): work it did outside its effects stands, and the log says so.
        attempt_end: &'a str,
    },
    /// Waiting for its job's overlap slot; its claim given back.
    Waiting,
    /// A limit of its job held the run back; its claim given back.
    Throttled {
        /// The limit.
        limit: &'a str,
        /// Why, as the log line says it (full, or the rate's next start).
        why: &'a str,
    },
    /// The run handed the permit it gave back on to a run waiting for it, and woke it.
    HandedOn {
        /// What happened, as the log line says it (to whom, and whether its message
        /// could be woken).
        note: &'a str,
    },
    /// The run entered its job's limits after waiting for them.
    LimitsEntered {
        /// How long it waited, from its first refusal.
        waited_ms: f64,
    },
    /// A permit could not be given back (its holder's record lets the next taker drop it).
    PermitKept {
        /// What failed.
        error: &'a str,
    },
    /// The overlap slot could not be left (it lapses by itself).
    SlotKept {
        /// What failed.
        error: &'a str,
    },
    /// A claim could not be given back (it lapses after its lease).
    ClaimKept {
        /// What failed.
        error: &'a str,
    },
    /// A chain run's execution started.
    ChainStarted,
    /// A chain run ended: every step DONE, or paused on a failed step.
    ChainEnded {
        /// Paused on a step that failed for good.
        paused: bool,
    },
    /// An earlier execution's end, after a rerun: left to the current one.
    StaleEnd,
    /// A FAILED run could not be counted toward its job's streak.
    StreakNotCounted {
        /// What failed.
        error: &'a str,
    },
    /// A DONE run could not end its job's streak.
    StreakNotCleared {
        /// What failed.
        error: &'a str,
    },
    /// The job's streak is long enough, and its schedule was not paused.
    PauseNotMade {
        /// Why not.
        error: &'a str,
    },
    /// The pause is recorded, and the schedule could not be disabled yet.
    ScheduleNotDisabled {
        /// What failed.
        error: &'a str,
    },
    /// The worker paused the job's schedule after its streak.
    AutoPaused {
        /// The pause's reason, as recorded.
        reason: &'a str,
    },
}

impl Event<'_> {
    /// The log line's `status`: a record status or what happened to the message.
    pub fn status(&self) -> &'static str {
        match self {
            Event::Rejected { .. } => "REJECTED",
            Event::Deferred => "DEFERRED",
            Event::Duplicate { .. } => "DUPLICATE",
            Event::AlreadyFailed { .. } => "ALREADY_FAILED",
            Event::InProgress { .. } => "IN_PROGRESS",
            Event::Running { .. } => "RUNNING",
            Event::Done { .. } => "DONE",
            Event::Retrying { .. } => "RETRYING",
            Event::Failed { .. } => "FAILED",
            Event::LeaseLost { .. } | Event::ClaimTakenOver => "LEASE_LOST",
            Event::Unavailable { .. } => "UNAVAILABLE",
            Event::Skipped { .. } => "SKIPPED",
            Event::Waiting => "WAITING",
            Event::Cancelled { .. } => "CANCELLED",
            Event::SlotKept { .. } => "SLOT_KEPT",
            Event::Throttled { .. } => "THROTTLED",
            Event::LimitsEntered { .. } => "LIMITS_ENTERED",
            Event::HandedOn { .. } => "HANDED_ON",
            Event::PermitKept { .. } => "PERMIT_KEPT",
            Event::ClaimKept { .. } => "CLAIM_KEPT",
            Event::ChainStarted => "CHAIN_STARTED",
            Event::ChainEnded { paused: true } | Event::AutoPaused { .. } => "PAUSED",
            Event::ChainEnded { paused: false } => "DONE",
            Event::StaleEnd => "STALE_END",
            Event::StreakNotCounted { .. } => "STREAK_NOT_COUNTED",
            Event::StreakNotCleared { .. } => "STREAK_NOT_CLEARED",
            Event::PauseNotMade { .. } => "PAUSE_NOT_MADE",
            Event::ScheduleNotDisabled { .. } => "SCHEDULE_NOT_DISABLED",
        }
    }

    /// The attempt and its duration, as the log line says them (0 when nothing ran).
    fn attempt(&self) -> (u32, u64) {
        match *self {
            Event::Duplicate { attempt, .. }
            | Event::InProgress { attempt }
            | Event::Running { attempt, .. } => (attempt, 0),
            Event::AlreadyFailed { attempts, .. } => (attempts, 0),
            Event::Done {
                attempt,
                duration_ms,
            }
            | Event::Retrying {
                attempt,
                duration_ms,
                ..
            }
            | Event::Failed {
                attempt,
                duration_ms,
                ..
            }
            | Event::LeaseLost {
                attempt,
                duration_ms,
                ..
            }
            | Event::Unavailable {
                attempt,
                duration_ms,
                ..
            } => (attempt, duration_ms),
            _ => (0, 0),
        }
    }

    /// The log line's `error`.
    fn error(&self) -> String {
        match self {
            Event::Rejected { why: text, .. }
            | Event::Duplicate { note: text, .. }
            | Event::AlreadyFailed { error: text, .. }
            | Event::Retrying { error: text, .. }
            | Event::Failed { error: text, .. }
            | Event::LeaseLost { error: text, .. }
            | Event::Unavailable { error: text, .. }
            | Event::SlotKept { error: text }
            | Event::PermitKept { error: text }
            | Event::HandedOn { note: text }
            | Event::Throttled { why: text, .. }
            | Event::ClaimKept { error: text }
            | Event::StreakNotCounted { error: text }
            | Event::StreakNotCleared { error: text }
            | Event::PauseNotMade { error: text }
            | Event::ScheduleNotDisabled { error: text }
            | Event::AutoPaused { reason: text } => (*text).to_string(),
            Event::Skipped { running } => format!("`{running}` was running"),
            Event::Cancelled {
                by,
                reason,
                attempt_end,
            } => {
                if attempt_end.is_empty() {
                    format!("cancelled by {by}: {reason}")
                } else {
                    format!("cancelled by {by}: {reason}; {attempt_end}")
                }
            }
            Event::ClaimTakenOver => "the claim was taken over before it was given back".into(),
            Event::StaleEnd => {
                "an earlier execution's end, after a rerun: the run is left to its current one"
                    .into()
            }
            _ => String::new(),
        }
    }

    /// The metrics it counts, and the job dimension they are counted under when it is not
    /// the transition's own (None: the transition's).
    fn metrics(&self) -> (Vec<(Metric, f64)>, Option<&str>) {
        let duration = |ms: u64| (Metric::Duration, ms as f64);
        let values = match *self {
            Event::Rejected { counted_as, .. } => {
                return match counted_as {
                    Some(job) => (vec![(Metric::Rejected, 1.0)], Some(job)),
                    None => (Vec::new(), None),
                };
            }
            Event::Duplicate { .. } | Event::AlreadyFailed { .. } | Event::StaleEnd => {
                vec![(Metric::Duplicate, 1.0)]
            }
            Event::InProgress { .. } => vec![(Metric::InProgressConflict, 1.0)],
            Event::Running { lag_ms, .. } => {
                vec![(Metric::Started, 1.0), (Metric::ScheduleLag, lag_ms)]
            }
            Event::Done { duration_ms, .. } => {
                vec![(Metric::Succeeded, 1.0), duration(duration_ms)]
            }
            Event::Retrying { duration_ms, .. } => {
                vec![(Metric::Retried, 1.0), duration(duration_ms)]
            }
            Event::Failed { duration_ms, .. } => vec![(Metric::Failed, 1.0), duration(duration_ms)],
            Event::LeaseLost { .. } => vec![(Metric::LeaseLost, 1.0)],
            Event::Skipped { .. } => vec![(Metric::Skipped, 1.0)],
            Event::Waiting => vec![(Metric::OverlapWaited, 1.0)],
            Event::Cancelled { .. } => vec![(Metric::Cancelled, 1.0)],
            Event::Throttled { .. } => vec![(Metric::Throttled, 1.0)],
            Event::LimitsEntered { waited_ms } => vec![(Metric::LimitWait, waited_ms)],
            Event::ChainStarted => vec![(Metric::Started, 1.0)],
            Event::ChainEnded { paused: true } => vec![(Metric::ChainPaused, 1.0)],
            Event::ChainEnded { paused: false } => vec![(Metric::ChainDone, 1.0)],
            Event::AutoPaused { .. } => vec![(Metric::AutoPaused, 1.0)],
            _ => Vec::new(),
        };
        (values, None)
    }

    /// Writes the event's log line (the transition `t` says which message and run) and
    /// its metrics.
    pub fn record(&self, t: &Transition<'_>, metrics: &Metrics) {
        let (attempt, duration_ms) = self.attempt();
        let error = self.error();
        Transition {
            status: self.status(),
            attempt,
            duration_ms,
            error: &error,
            ..t.clone()
        }
        .log();
        let (values, dimension) = self.metrics();
        match self {
            Event::Throttled { limit, .. } => metrics.emit_for_limit(t.job, limit, &values),
            _ => metrics.emit(dimension.unwrap_or(t.job), &values),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted(event: &Event<'_>) -> Vec<serde_json::Value> {
        let (metrics, lines) = Metrics::capture();
        let t = Transition {
            job: "report",
            key: "k",
            ..Default::default()
        };
        event.record(&t, &metrics);
        let lines = lines.lock().unwrap();
        lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn an_outcome_is_counted_with_its_duration_in_one_line() {
        let lines = counted(&Event::Done {
            attempt: 2,
            duration_ms: 40,
        });
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["Succeeded"], 1.0);
        assert_eq!(lines[0]["Duration"], 40.0);
        assert_eq!(lines[0]["Job"], "report");
    }

    #[test]
    fn a_rejection_is_counted_under_its_dimension_only_once_its_letter_is_sent() {
        let sent = counted(&Event::Rejected {
            why: "poison: x",
            counted_as: Some("(unknown)"),
        });
        assert_eq!(sent[0]["Job"], "(unknown)");
        assert_eq!(sent[0]["Rejected"], 1.0);
        let kept = counted(&Event::Rejected {
            why: "poison: x",
            counted_as: None,
        });
        assert!(kept.is_empty());
    }

    #[test]
    fn transitions_that_change_nothing_counted_are_logged_only() {
        for e in [
            Event::Deferred,
            Event::ClaimTakenOver,
            Event::SlotKept { error: "e" },
            Event::Unavailable {
                attempt: 0,
                duration_ms: 0,
                error: "e",
            },
        ] {
            assert!(counted(&e).is_empty(), "{e:?}");
        }
    }

    #[test]
    fn statuses_keep_the_names_log_queries_rely_on() {
        assert_eq!(Event::ChainEnded { paused: true }.status(), "PAUSED");
        assert_eq!(Event::ClaimTakenOver.status(), "LEASE_LOST");
        let cancelled = Event::Cancelled {
            by: "ops",
            reason: "bad deploy",
            attempt_end: "attempt 1 had run to its end (succeeded) before it learnt",
        };
        assert_eq!(cancelled.status(), "CANCELLED");
        assert_eq!(
            cancelled.error(),
            "cancelled by ops: bad deploy; attempt 1 had run to its end (succeeded) before it learnt",
            "a cancellation that came too late says what had run"
        );
        assert_eq!(
            Event::Skipped { running: "a" }.error(),
            "`a` was running",
            "the skipped run names the one that held the slot"
        );
    }
}
