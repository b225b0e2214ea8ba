//! Example jobs, one per behaviour the framework must handle: an external side effect,
//! a long run that needs heartbeats, a transient failure, and a failure that never heals.

mod always_fails;
mod flaky_sync;
mod long_report;
mod record_invoice;

use std::time::Duration;

use schedkit::{JobPolicy, Registry, RetryPolicy};

pub use record_invoice::{EFFECT_KEY, RecordInvoice};

/// The example registry. `effects_table` is where `record-invoice` writes.
pub fn registry(ddb: aws_sdk_dynamodb::Client, effects_table: Option<String>) -> Registry {
    let quick_retries = |max_attempts| RetryPolicy {
        max_attempts,
        first_delay: Duration::from_secs(1),
        base_delay: Duration::from_secs(2),
        max_delay: Duration::from_secs(10),
    };
    Registry::new()
        .register(
            "record-invoice",
            JobPolicy {
                key_template: Some(
                    "invoice:{billing_month}:{tenant}"
                        .parse()
                        .expect("valid template"),
                ),
                ..JobPolicy::default().with_lease(Duration::from_secs(30))
            },
            record_invoice::RecordInvoice::new(ddb, effects_table),
        )
        .register(
            "long-report",
            JobPolicy::default().with_lease(Duration::from_secs(2)),
            long_report::run,
        )
        .register(
            "flaky-sync",
            JobPolicy {
                retry: quick_retries(5),
                ..JobPolicy::default().with_lease(Duration::from_secs(30))
            },
            flaky_sync::run,
        )
        .register(
            "always-fails",
            JobPolicy {
                retry: quick_retries(3),
                ..JobPolicy::default().with_lease(Duration::from_secs(30))
            },
            always_fails::run,
        )
}
