//! Traces compiled out (the `otlp` feature off): the same calls, doing nothing.

use std::time::SystemTime;

use super::trace_ids::RemoteSpan;

/// Nothing to send.
pub async fn flush() {}

/// Nothing to stop.
pub fn shutdown() {}

/// Nothing to set up.
pub fn init_exporter() {}

/// No trigger span is written.
pub fn trigger(_what: &str, _root_key: &str, _key: &str) -> Option<RemoteSpan> {
    None
}

pub(crate) fn delivery_span(
    job: &str,
    _root_key: &str,
    key: &str,
    _carried: Option<RemoteSpan>,
) -> tracing::Span {
    tracing::info_span!("delivery", schedkit.job = job, schedkit.key = key)
}

pub(crate) fn run_ended(
    _key: &str,
    _chain_key: Option<&str>,
    _job: &str,
    _start: SystemTime,
    _outcome: &str,
) {
}

pub(crate) fn chain_event(
    _chain: &str,
    _key: &str,
    _event: &str,
    _carried: Option<RemoteSpan>,
    _began: SystemTime,
    _run_start: Option<SystemTime>,
) {
}
