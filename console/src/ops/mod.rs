//! What the operator commands do, apart from printing: reading records and dead letters,
//! moving messages, keeping the audit trail.

pub mod audit;
pub mod dlq;
pub mod executions;
pub mod status;
