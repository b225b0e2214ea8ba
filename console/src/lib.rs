//! schedkit's operator console: flags, screens and output. `main.rs` parses the command
//! line; each command is a module of [`cli`]. What a command does to AWS is the library's
//! (`schedkit::ops`, `schedkit::trigger`, `schedkit::iac`) or the local firing engine's
//! (`schedkit-firing-engine`): the console calls no AWS API itself, so any other binary can
//! do what it does.

pub mod cli;
pub mod ui;
