//! The ids of a run's trace, worked out from its keys alone. A run's trace id is its root
//! key's (a chain step's root is its chain run; any other run is its own root), and a
//! run's own span id is its key's: every worker, the console and a chain's steps (whose
//! messages Step Functions writes, with no room for a trace header) agree on them with
//! nothing carried along, a redriven run stays in its trace, and a record shows its trace
//! id without storing one. What a message does carry (a `traceparent` attribute from
//! `schedkit fire`, the `AWSTraceHeader` of Lambda's active tracing) is parsed here too.

use sha2::{Digest, Sha256};

/// W3C's name for the trace context header, and schedkit's message attribute for it.
pub const TRACEPARENT: &str = "traceparent";

fn digest(domain: &str, key: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(domain.as_bytes());
    h.update([0]);
    h.update(key.as_bytes());
    h.finalize().into()
}

/// The stage this process works for ([`set_stage`]); `-` when none was set.
static STAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the stage whose traces this process writes and shows (once; later calls are
/// ignored): stages of one account share a trace back end, and the same key in two
/// stages is two runs.
pub fn set_stage(stage: &str) {
    let _ = STAGE.set(stage.to_string());
}

/// The stage a process names (`--stage`), else the one its executions table's name says
/// (`schedkit-<stage>-executions`), else `-`: as the worker names its metrics' stage.
pub fn stage_of(stage: Option<&str>, table: Option<&str>) -> String {
    stage
        .map(str::to_owned)
        .or_else(|| {
            table?
                .strip_prefix("schedkit-")?
                .strip_suffix("-executions")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "-".into())
}

/// The trace id of every span of the run rooted at `root_key` in this process's stage.
pub fn trace_id(root_key: &str) -> [u8; 16] {
    trace_id_in(STAGE.get().map_or("-", String::as_str), root_key)
}

/// The trace id of the run rooted at `root_key` in `stage` (never all zeros).
pub fn trace_id_in(stage: &str, root_key: &str) -> [u8; 16] {
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest("schedkit trace", &format!("{stage}\0{root_key}"))[..16]);
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}

/// The span id of the run `key` itself (its whole life, from its trigger to its end).
pub fn run_span_id(key: &str) -> [u8; 8] {
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest("schedkit run", key)[..8]);
    if id == [0; 8] {
        id[7] = 1;
    }
    id
}

/// `trace_id(root_key)` as 32 lowercase hex digits, as trace back ends show it.
pub fn trace_id_hex(root_key: &str) -> String {
    hex::encode(trace_id(root_key))
}

/// A remote span: the trigger's, from a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteSpan {
    /// Its trace.
    pub trace_id: [u8; 16],
    /// The span itself.
    pub span_id: [u8; 8],
    /// Whether its trace is sampled.
    pub sampled: bool,
}

impl RemoteSpan {
    /// A W3C `traceparent` value: `00-<trace id>-<span id>-<flags>`.
    pub fn parse_traceparent(text: &str) -> Option<RemoteSpan> {
        let mut parts = text.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version != "00" || parts.next().is_some() {
            return None;
        }
        let span = RemoteSpan {
            trace_id: hex::decode(trace).ok()?.try_into().ok()?,
            span_id: hex::decode(span).ok()?.try_into().ok()?,
            sampled: u8::from_str_radix(flags, 16).ok()? & 1 == 1,
        };
        (span.trace_id != [0; 16] && span.span_id != [0; 8]).then_some(span)
    }

    /// X-Ray's trace header (`Root=1-5759e988-bd862e3fe1be46a994272793;Parent=...;
    /// Sampled=1`), which SQS passes on as the `AWSTraceHeader` attribute when the sender
    /// traces with X-Ray: its root's 24 hex digits after the epoch are the W3C trace id's.
    pub fn parse_xray(text: &str) -> Option<RemoteSpan> {
        let field = |name: &str| {
            text.split(';')
                .find_map(|p| p.trim().strip_prefix(name)?.strip_prefix('='))
        };
        let root = field("Root")?.strip_prefix("1-")?.replace('-', "");
        let trace_id = hex::decode(root).ok()?.try_into().ok()?;
        let span_id = hex::decode(field("Parent")?).ok()?.try_into().ok()?;
        Some(RemoteSpan {
            trace_id,
            span_id,
            sampled: field("Sampled") == Some("1"),
        })
    }

    /// As a `traceparent` value.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            hex::encode(self.trace_id),
            hex::encode(self.span_id),
            u8::from(self.sampled)
        )
    }
}

/// The trace id of a record's run: a chain step's is its chain run's (the step's message,
/// kept as the record's input, names it), any other run's its own key's.
pub fn of_record(record: &crate::store::ExecutionRecord) -> String {
    let chain_key = record
        .input
        .as_deref()
        .and_then(|body| crate::envelope::Envelope::parse(body).ok())
        .and_then(|e| e.chain.filter(|c| c.step.is_some()).map(|c| c.key));
    trace_id_hex(chain_key.as_deref().unwrap_or(&record.execution_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_keys_and_pinned() {
        assert_eq!(trace_id("a"), trace_id("a"));
        assert_ne!(trace_id("a"), trace_id("b"));
        assert_ne!(run_span_id("a")[..], trace_id("a")[..8]);
        // Pinned: a change here splits the traces of runs in flight across an upgrade.
        assert_eq!(trace_id_hex("month-end#2026-11").len(), 32);
        assert_eq!(
            hex::encode(trace_id_in("prod", "month-end#2026-11")),
            hex::encode(&Sha256::digest(b"schedkit trace\0prod\0month-end#2026-11")[..16])
        );
        // The same key in two stages: two traces.
        assert_ne!(trace_id_in("dev", "a"), trace_id_in("prod", "a"));
    }

    #[test]
    fn trace_headers_are_read_and_bad_ones_refused() {
        let w3c = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let span = RemoteSpan::parse_traceparent(w3c).unwrap();
        assert!(span.sampled);
        assert_eq!(span.traceparent(), w3c);
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902-01",
            "00-xyz-00f067aa0ba902b7-01",
        ] {
            assert_eq!(RemoteSpan::parse_traceparent(bad), None, "{bad}");
        }
        let xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        let span = RemoteSpan::parse_xray(xray).unwrap();
        assert_eq!(
            hex::encode(span.trace_id),
            "5759e988bd862e3fe1be46a994272793"
        );
        assert_eq!(hex::encode(span.span_id), "53995c3f42cd8ad8");
        assert!(span.sampled);
        assert_eq!(
            RemoteSpan::parse_xray("Root=1-5759e988-bd86;Sampled=1"),
            None
        );
    }

    #[test]
    fn a_steps_record_is_in_its_chain_runs_trace_any_other_in_its_own() {
        let at = "2026-11-30T02:00:00Z".parse().unwrap();
        let mut step = crate::accounting::run_of("month-end#2026-11#summary", "long-report", at);
        step.input = Some(
            r#"{"job":"long-report","scheduled_for":"2026-11-30T02:00:00Z","key":"month-end#2026-11#summary","chain":{"name":"month-end","key":"month-end#2026-11","step":"summary","task_token":"t"}}"#
                .into(),
        );
        assert_eq!(of_record(&step), trace_id_hex("month-end#2026-11"));
        let plain = crate::accounting::run_of("nightly#2026-11-30T02:00:00Z", "nightly", at);
        assert_eq!(
            of_record(&plain),
            trace_id_hex("nightly#2026-11-30T02:00:00Z")
        );
    }
}
