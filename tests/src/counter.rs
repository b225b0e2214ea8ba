//! Counts the requests an SDK client puts on the wire (retries included), for tests that
//! assert how many calls an operation makes. Works with any AWS SDK client. The execution
//! store's lease renewals are counted apart (they depend on how long a job runs, not on
//! how many jobs there are).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::config::interceptors::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};

/// A shareable request count; register it with a client's `interceptor(...)`.
#[derive(Debug, Default, Clone)]
pub struct RequestCounter {
    count: Arc<AtomicU64>,
    heartbeats: Arc<AtomicU64>,
    /// Operations called and attempts sent, whatever they were: their difference is the
    /// SDK's retries (a loaded LocalStack answering late), named in a failed count.
    operations: Arc<AtomicU64>,
    attempts: Arc<AtomicU64>,
    writes_only: bool,
}

/// What only a lease renewal's request says: its update expression.
const HEARTBEAT: &[u8] = b"SET #lease_expires_at = :lease, #updated_at = :now";

impl RequestCounter {
    /// Counts every request.
    pub fn all() -> Self {
        Self::default()
    }

    /// Counts only requests that are not HTTP GETs (for REST APIs: the writes).
    pub fn writes() -> Self {
        RequestCounter {
            writes_only: true,
            ..Self::default()
        }
    }

    /// Requests counted, lease renewals not included.
    pub fn get(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// Lease renewals (heartbeats) counted.
    pub fn heartbeats(&self) -> u64 {
        self.heartbeats.load(Ordering::SeqCst)
    }

    /// Attempts the SDK sent again after a failed one (counted in [`RequestCounter::get`]
    /// or [`RequestCounter::heartbeats`] too, as they are on the wire).
    pub fn retries(&self) -> u64 {
        let attempts = self.attempts.load(Ordering::SeqCst);
        attempts.saturating_sub(self.operations.load(Ordering::SeqCst))
    }

    pub fn reset(&self) {
        for count in [
            &self.count,
            &self.heartbeats,
            &self.operations,
            &self.attempts,
        ] {
            count.store(0, Ordering::SeqCst);
        }
    }
}

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "RequestCounter"
    }

    fn read_before_execution(
        &self,
        _: &BeforeSerializationInterceptorContextRef<'_>,
        _: &mut ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        self.operations.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), aws_sdk_dynamodb::error::BoxError> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        let request = context.request();
        let renewal = request
            .body()
            .bytes()
            .is_some_and(|b| b.windows(HEARTBEAT.len()).any(|w| w == HEARTBEAT));
        if renewal {
            self.heartbeats.fetch_add(1, Ordering::SeqCst);
        } else if !self.writes_only || request.method() != "GET" {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}
