//! The worker's random draws: retry jitter and the unique part of owner tokens. From the
//! thread's generator in production; from one seeded generator in the simulation, so that
//! a seed replays the same run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::retry::RetryPolicy;

/// Where the draws come from.
#[derive(Clone, Debug, Default)]
pub(crate) enum Draws {
    /// The thread's generator, and version-4 UUIDs.
    #[default]
    Thread,
    /// One generator for the whole processor.
    Seeded(Arc<Mutex<StdRng>>),
}

impl Draws {
    pub(crate) fn seeded(seed: u64) -> Draws {
        Draws::Seeded(Arc::new(Mutex::new(StdRng::seed_from_u64(seed))))
    }

    /// The jittered delay after attempt `failed` failed.
    pub(crate) fn retry_delay(&self, retry: &RetryPolicy, failed: u32) -> Duration {
        match self {
            Draws::Thread => retry.delay_after(failed, &mut rand::rng()),
            Draws::Seeded(rng) => {
                let mut rng = rng.lock().unwrap_or_else(|p| p.into_inner());
                retry.delay_after(failed, &mut *rng)
            }
        }
    }

    /// A random part of `span`, from none of it to all of it: spreads the looks of runs
    /// that wait for the same limit.
    pub(crate) fn jitter(&self, span: Duration) -> Duration {
        let fraction: f64 = match self {
            Draws::Thread => rand::rng().random(),
            Draws::Seeded(rng) => rng.lock().unwrap_or_else(|p| p.into_inner()).random(),
        };
        span.mul_f64(fraction)
    }

    /// A fresh unique token for an owner (the part after `<worker id>:`).
    pub(crate) fn token(&self) -> String {
        match self {
            Draws::Thread => uuid::Uuid::new_v4().to_string(),
            Draws::Seeded(rng) => {
                let mut rng = rng.lock().unwrap_or_else(|p| p.into_inner());
                uuid::Uuid::from_u128(rng.random()).to_string()
            }
        }
    }
}
