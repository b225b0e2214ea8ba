//! schedkit's console and trigger layer. `main.rs` parses the command line; each command
//! and the trigger-layer operations live here, where tests reach them.

mod aws_error;
pub mod cli;
pub mod iac;
pub mod ops;
pub mod trigger;
