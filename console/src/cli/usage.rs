//! The errors that are the user's to fix: exit code 2, one line that says what to change.

/// A failure that is the user's to fix (bad input, invalid catalog): exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
