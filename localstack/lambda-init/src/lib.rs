//! A Lambda init for LocalStack on machines without Docker.
//!
//! LocalStack runs a Lambda by starting an *init* next to the function's code; the init
//! tells LocalStack when the function is ready, takes invocations from it, serves the
//! standard Lambda Runtime API to the function's `bootstrap`, and posts back logs and
//! results. LocalStack's own init is a Go binary it downloads into a Docker container.
//! This one is a host process started by schedkit's executor plugin
//! (`localstack/executor-plugin`), with ephemeral ports so environments run side by side.
//!
//! [`environment::Environment`] is usable on its own: it is also the Runtime API emulator
//! the worker's tests drive the Lambda binary with.

pub mod config;
pub mod environment;
pub mod localstack;
pub mod report;
pub mod runtime_api;

pub use config::FunctionConfig;
pub use environment::{Environment, Invoke, Invoked, Outcome, StartError};
