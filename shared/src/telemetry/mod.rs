//! What a worker tells the outside world: EMF metrics and JSON log lines, both on stdout,
//! where Lambda ships them to CloudWatch Logs and CloudWatch extracts the metrics; and
//! traces over OTLP when an endpoint is configured.

pub mod event;
pub mod logging;
pub mod metrics;
pub mod trace_ids;
#[cfg(feature = "otlp")]
pub mod traces;
#[cfg(not(feature = "otlp"))]
#[path = "traces_off.rs"]
pub mod traces;

pub use event::Event;
pub use logging::{Transition, init_logging};
pub use metrics::{Metric, Metrics, NO_STAGE};
