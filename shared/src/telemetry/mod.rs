//! What a worker tells the outside world: EMF metrics and JSON log lines, both on stdout,
//! where Lambda ships them to CloudWatch Logs and CloudWatch extracts the metrics.

pub mod event;
pub mod logging;
pub mod metrics;

pub use event::Event;
pub use logging::{Transition, init_logging};
pub use metrics::{Metric, Metrics, NO_STAGE};
