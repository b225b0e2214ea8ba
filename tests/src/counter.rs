//! Counts the requests an SDK client puts on the wire (retries included), for tests that
//! assert how many calls an operation makes. Works with any AWS SDK client.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};

/// A shareable request count; register it with a client's `interceptor(...)`.
#[derive(Debug, Default, Clone)]
pub struct RequestCounter {
    count: Arc<AtomicU64>,
    writes_only: bool,
}

impl RequestCounter {
    /// Counts every request.
    pub fn all() -> Self {
        Self::default()
    }

    /// Counts only requests that are not HTTP GETs (for REST APIs: the writes).
    pub fn writes() -> Self {
        RequestCounter {
            count: Arc::default(),
            writes_only: true,
        }
    }

    pub fn get(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    pub fn reset(&self) {
        self.count.store(0, Ordering::SeqCst);
    }
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "RequestCounter"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        if !self.writes_only || context.request().method() != "GET" {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}
