//! The trigger layer: EventBridge Scheduler kept in sync with the catalog, one-off jobs, and
//! a local firing engine for endpoints whose scheduler never fires (LocalStack).

pub mod claims;
pub mod engine;
pub mod one_off;
pub mod sync;
pub mod template;
