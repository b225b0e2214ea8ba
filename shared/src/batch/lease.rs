//! Keeping the lease of a running attempt: heartbeats renew it (then the message's
//! visibility), and a watchdog says when it is no longer confirmed.
//!
//! The worker knows until when its lease is *confirmed*: the moment the last successful
//! renewal was sent (or the claim), plus the lease, minus the clock-skew bound (see
//! [`crate::clock`]). Past that moment another worker may have reclaimed the run, so the
//! attempt is cancelled, whatever the reason the renewal did not come: store errors, a
//! renewal with no answer (every one has a timeout of one heartbeat interval), a stalled
//! runtime, or a refusal (fenced). Fencing protects the record; this protects the effect.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::clock::Clock;
use crate::queue::JobQueue;
use crate::store::{ExecutionStore, TransitionError};

/// What the heartbeats need.
pub(crate) struct Heartbeat {
    pub store: std::sync::Arc<dyn ExecutionStore>,
    pub queue: std::sync::Arc<dyn JobQueue>,
    pub receipt_handle: Option<String>,
    pub key: String,
    pub owner: String,
    pub every: Duration,
    pub lease: Duration,
    pub clock: Clock,
    /// A chain step's task, kept alive with the lease.
    pub task: Option<super::chains::TaskHeartbeat>,
}

/// The lease as the owner knows it.
#[derive(Clone, Debug)]
struct Confirmed {
    /// Until when no worker within the skew bound can have reclaimed the run.
    safe_until: Instant,
    /// Why the last renewal did not confirm it, if it did not.
    last_error: Option<String>,
    /// A renewal was refused: the run belongs to someone else (or was finished).
    lost: bool,
}

/// Why an attempt must stop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Lapse {
    /// A renewal was refused: another worker owns the run now.
    Lost,
    /// No renewal confirmed the lease in time.
    Unconfirmed {
        /// Why the last renewal failed (None: none was tried, e.g. heartbeats are off).
        last_error: Option<String>,
    },
}

impl std::fmt::Display for Lapse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lapse::Lost => write!(
                f,
                "lease lost: another worker owns the run; attempt cancelled"
            ),
            Lapse::Unconfirmed { last_error: None } => {
                write!(f, "lease ran out before the job ended; attempt cancelled")
            }
            Lapse::Unconfirmed {
                last_error: Some(e),
            } => write!(
                f,
                "lease could not be renewed in time ({e}); attempt cancelled"
            ),
        }
    }
}

/// Heartbeats of one attempt and the watch on its lease. Dropping it stops the heartbeats.
pub(crate) struct LeaseKeeper {
    confirmed: watch::Receiver<Confirmed>,
    /// Tells the job (`Ctx::lease_lost`).
    told: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl LeaseKeeper {
    /// Starts keeping a lease claimed at `claimed_at` (when the claim was sent) for `lease`,
    /// with heartbeats when given; `told` is the job's lease-lost flag.
    pub fn start(
        heartbeat: Option<Heartbeat>,
        claimed_at: Instant,
        lease: Duration,
        skew: Duration,
        told: watch::Sender<bool>,
    ) -> Self {
        let (tx, confirmed) = watch::channel(Confirmed {
            safe_until: safe_until(claimed_at, lease, skew),
            last_error: None,
            lost: false,
        });
        let task = heartbeat.map(|h| tokio::spawn(h.run(skew, tx)));
        LeaseKeeper {
            confirmed,
            told,
            task,
        }
    }

    /// Resolves when the attempt must stop, and tells the job so first. Never resolves while
    /// the lease stays confirmed.
    pub async fn lapsed(&self) -> Lapse {
        let mut confirmed = self.confirmed.clone();
        let lapse = loop {
            let now = confirmed.borrow_and_update().clone();
            if now.lost {
                break Lapse::Lost;
            }
            tokio::select! {
                // A stalled runtime wakes with both ready: the deadline wins.
                biased;
                () = tokio::time::sleep_until(now.safe_until) => {
                    let last_error = confirmed.borrow().last_error.clone();
                    break Lapse::Unconfirmed { last_error };
                }
                changed = confirmed.changed() => {
                    if changed.is_err() {
                        // Heartbeats ended (they never do while running): wait out the lease.
                        tokio::time::sleep_until(now.safe_until).await;
                        break Lapse::Unconfirmed { last_error: now.last_error };
                    }
                }
            }
        };
        let _ = self.told.send(true);
        lapse
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The last moment the lease renewed at `sent` is safely ours.
fn safe_until(sent: Instant, lease: Duration, skew: Duration) -> Instant {
    sent + lease.saturating_sub(skew)
}

impl Heartbeat {
    /// Renews every `every` until refused (or aborted when the outcome is written),
    /// reporting each result to the watch.
    async fn run(self, skew: Duration, confirmed: watch::Sender<Confirmed>) {
        let mut next = Instant::now() + self.every;
        loop {
            tokio::time::sleep_until(next).await;
            let sent = Instant::now();
            next = sent + self.every;
            let renewal =
                self.store
                    .heartbeat(&self.key, &self.owner, self.clock.now(), self.lease);
            match tokio::time::timeout(self.every, renewal).await {
                Ok(Ok(())) => {
                    confirmed.send_modify(|c| {
                        c.safe_until = safe_until(sent, self.lease, skew);
                        c.last_error = None;
                    });
                    self.extend_visibility().await;
                    if let Some(task) = &self.task {
                        task.beat().await;
                    }
                }
                Ok(Err(TransitionError::LeaseLost { .. })) => {
                    tracing::warn!(key = self.key, "heartbeat refused: lease lost");
                    confirmed.send_modify(|c| c.lost = true);
                    return;
                }
                Ok(Err(TransitionError::Store(e))) => {
                    tracing::warn!(key = self.key, error = %e, "heartbeat failed; will retry");
                    confirmed.send_modify(|c| c.last_error = Some(e.to_string()));
                }
                Err(_) => {
                    let error = format!(
                        "heartbeat had no answer within {} ms",
                        self.every.as_millis()
                    );
                    tracing::warn!(key = self.key, error, "heartbeat failed; will retry");
                    confirmed.send_modify(|c| c.last_error = Some(error));
                }
            }
        }
    }

    async fn extend_visibility(&self) {
        let Some(receipt) = &self.receipt_handle else {
            return;
        };
        let secs = self.lease.as_secs_f64().ceil().max(1.0) as i32;
        let change = self.queue.change_visibility(receipt, secs);
        match tokio::time::timeout(self.every, change).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(
                key = self.key,
                error = %e,
                "could not extend message visibility"
            ),
            Err(_) => tracing::warn!(key = self.key, "extending message visibility had no answer"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keeper(lease_ms: u64, skew_ms: u64) -> (LeaseKeeper, watch::Receiver<bool>) {
        let (told, job_sees) = watch::channel(false);
        let keeper = LeaseKeeper::start(
            None,
            Instant::now(),
            Duration::from_millis(lease_ms),
            Duration::from_millis(skew_ms),
            told,
        );
        (keeper, job_sees)
    }

    #[tokio::test(start_paused = true)]
    async fn an_unrenewed_lease_lapses_the_skew_bound_before_it_runs_out_and_the_job_is_told() {
        let start = Instant::now();
        let (keeper, job_sees) = keeper(10_000, 1_000);
        let lapse = keeper.lapsed().await;
        assert_eq!(lapse, Lapse::Unconfirmed { last_error: None });
        assert_eq!(start.elapsed(), Duration::from_millis(9_000));
        assert!(*job_sees.borrow());
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_pushes_the_lapse_out_and_a_failed_one_is_named() {
        let start = Instant::now();
        let (tx, confirmed) = watch::channel(Confirmed {
            safe_until: safe_until(start, Duration::from_secs(10), Duration::from_secs(1)),
            last_error: None,
            lost: false,
        });
        let keeper = LeaseKeeper {
            confirmed,
            told: watch::channel(false).0,
            task: None,
        };
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            tx.send_modify(|c| c.safe_until = Instant::now() + Duration::from_secs(9));
            tokio::time::sleep(Duration::from_secs(5)).await;
            tx.send_modify(|c| c.last_error = Some("throttled".into()));
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(tx);
        });
        let lapse = keeper.lapsed().await;
        assert_eq!(start.elapsed(), Duration::from_secs(14));
        assert_eq!(
            lapse.to_string(),
            "lease could not be renewed in time (throttled); attempt cancelled"
        );
    }
}
