//! The schedkit worker: the example job registry, its settings, and the Lambda handler.
//! `main.rs` only picks the mode: Lambda when the Runtime API is there, polling otherwise.

pub mod jobs;
pub mod lambda;
pub mod settings;

pub use settings::Settings;
