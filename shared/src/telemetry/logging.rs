//! JSON log lines through `tracing`: one line per state transition, with the same fields
//! every time so a log query can rely on them. Payloads are never logged unless the
//! `SCHEDKIT_LOG_PAYLOADS` variable says so.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Sets up the JSON subscriber on stdout, and the traces' exporter when an OTLP endpoint
/// is configured (`super::traces`). `RUST_LOG` filters (default `info`). Calling it twice
/// is harmless (the second call does nothing).
pub fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let lines = tracing_subscriber::fmt::layer()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .with_writer(std::io::stdout);
    let registry = tracing_subscriber::registry().with(filter).with(lines);
    #[cfg(feature = "otlp")]
    let registry = registry.with(super::traces::layer());
    let _ = registry.try_init();
}

/// Whether payloads may appear in logs (`SCHEDKIT_LOG_PAYLOADS=1`).
pub(crate) fn payload_logging() -> bool {
    matches!(
        std::env::var("SCHEDKIT_LOG_PAYLOADS").as_deref(),
        Ok("1" | "true" | "yes")
    )
}

/// One transition of one message, as logged.
#[derive(Debug, Clone, Default)]
pub struct Transition<'a> {
    /// The envelope's job, or `-` when the body named none.
    pub job: &'a str,
    /// The execution key; empty before one is derived.
    pub key: &'a str,
    /// The scheduler's execution id, when the envelope carried one.
    pub execution_id: &'a str,
    /// Attempt within the round, from 1; 0 when nothing ran.
    pub attempt: u32,
    /// A record status (`RUNNING`, `DONE`, ...) or what happened to the message
    /// (`DUPLICATE`, `IN_PROGRESS`, `REJECTED`, `LEASE_LOST`, `UNAVAILABLE`).
    pub status: &'a str,
    /// How long the attempt ran, in milliseconds; 0 when nothing ran.
    pub duration_ms: u64,
    /// What went wrong; empty when nothing did.
    pub error: &'a str,
    /// The Lambda request id, or empty outside Lambda.
    pub request_id: &'a str,
    /// The SQS message id, to find the message or its dead letter.
    pub message_id: &'a str,
    /// Only filled when payload logging is on.
    pub payload: Option<&'a serde_json::Value>,
}

impl Transition<'_> {
    /// Writes the line: at warn level for FAILED, REJECTED, UNAVAILABLE and an automatic
    /// pause (made or not), info otherwise.
    pub fn log(&self) {
        let payload = self
            .payload
            .filter(|_| payload_logging())
            .map(|p| p.to_string());
        let level_error = matches!(
            self.status,
            "FAILED" | "REJECTED" | "UNAVAILABLE" | "PAUSED" | "PAUSE_NOT_MADE"
        );
        macro_rules! emit {
            ($level:ident) => {
                tracing::$level!(
                    job = self.job,
                    key = self.key,
                    execution_id = self.execution_id,
                    attempt = self.attempt,
                    status = self.status,
                    duration_ms = self.duration_ms,
                    error = self.error,
                    request_id = self.request_id,
                    message_id = self.message_id,
                    payload = payload.as_deref(),
                    "transition"
                )
            };
        }
        if level_error {
            emit!(warn);
        } else {
            emit!(info);
        }
    }
}
