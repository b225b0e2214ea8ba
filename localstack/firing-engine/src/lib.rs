//! The local firing engine: what EventBridge Scheduler does on AWS, for endpoints whose
//! scheduler stores schedules but never fires them (LocalStack). It lives with the other
//! stand-ins for AWS under `localstack/`, apart from the library: nothing deployed to AWS
//! links it.
//!
//! [`engine`] reads the schedules and delivers each due firing; [`delivery`] reaches the
//! targets and writes the dead letters; [`policy`] decides retries and flexible windows;
//! [`claims`] lets several engines share the work without firing one (schedule, scheduled
//! time) twice, and keeps their watermark for catching up.

pub mod claims;
pub mod delivery;
pub mod engine;
pub mod policy;

pub use engine::{Delivery, Engine, EngineOptions, Firing, LoadedSchedule};
