//! A job's failure: whether trying again can help, what to record, and the error behind it.
//!
//! `?` works on any error a job meets (`std::io::Error`, an SDK error, `serde_json::Error`):
//! it becomes a retryable failure, because most errors a scheduled job meets are a
//! dependency's bad moment. [`permanent`] says otherwise for the ones no retry can fix.
//! Like `anyhow::Error`, [`JobError`] is not itself a `std::error::Error`: that is what lets
//! `From` take every error without clashing with `From<JobError> for JobError`.

use std::error::Error;
use std::sync::Arc;

/// A job's failure, and whether trying again can help.
#[derive(Clone)]
pub struct JobError {
    kind: ErrorKind,
    /// The error's text with its sources, `outer: inner: innermost`: what the record keeps.
    message: String,
    source: Arc<dyn Error + Send + Sync + 'static>,
}

/// Whether another attempt can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Worth another attempt while the round has attempts left (a timeout, a throttled
    /// or briefly unavailable dependency).
    Retryable,
    /// Will fail the same way every time (bad input): the run ends FAILED in the DLQ.
    Permanent,
}

impl JobError {
    /// A failure worth another attempt: a message (`&str`, `String`) or any error, kept as
    /// the source.
    pub fn retryable(error: impl Into<Box<dyn Error + Send + Sync + 'static>>) -> Self {
        JobError::new(ErrorKind::Retryable, error.into())
    }

    /// A failure no retry can fix: a message or any error, kept as the source.
    pub fn permanent(error: impl Into<Box<dyn Error + Send + Sync + 'static>>) -> Self {
        JobError::new(ErrorKind::Permanent, error.into())
    }

    fn new(kind: ErrorKind, source: Box<dyn Error + Send + Sync + 'static>) -> Self {
        JobError {
            kind,
            message: with_sources(source.as_ref()),
            source: Arc::from(source),
        }
    }

    /// Whether another attempt can help.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// True for a failure worth another attempt.
    pub(crate) fn is_retryable(&self) -> bool {
        self.kind == ErrorKind::Retryable
    }

    /// The error the job met (a message becomes an error of its own): downcast it to see
    /// which (`e.source().downcast_ref::<std::io::Error>()`).
    pub fn source(&self) -> &(dyn Error + Send + Sync + 'static) {
        self.source.as_ref()
    }

    /// The text the record and the dead letter keep: the error and its sources.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// `err.map_err(permanent)?`: the error, marked as one no retry can fix, its source kept.
pub fn permanent(error: impl Into<Box<dyn Error + Send + Sync + 'static>>) -> JobError {
    JobError::permanent(error)
}

/// `?` on any error: retryable, its source kept.
impl<E> From<E> for JobError
where
    E: Error + Send + Sync + 'static,
{
    fn from(error: E) -> Self {
        JobError::retryable(error)
    }
}

impl std::fmt::Display for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::fmt::Debug for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobError")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .finish()
    }
}

/// Two failures are equal when they say the same thing the same way (the source's type
/// is not compared: errors rarely implement `PartialEq`).
impl PartialEq for JobError {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for JobError {}

/// `outer: inner: innermost`, skipping a source whose text its parent already ends with
/// (many errors print their source in their own message).
fn with_sources(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        let part = source.to_string();
        if !part.is_empty() && !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = source.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_config() -> Result<String, JobError> {
        Ok(std::fs::read_to_string("/nonexistent/schedkit/config")?)
    }

    #[test]
    fn question_mark_on_an_io_error_is_retryable_and_keeps_it() {
        let error = read_config().unwrap_err();
        assert!(error.is_retryable());
        let io = error.source().downcast_ref::<std::io::Error>();
        assert_eq!(io.map(|e| e.kind()), Some(std::io::ErrorKind::NotFound));
        assert!(error.message().contains("No such file"), "{error}");
    }

    #[test]
    fn permanent_keeps_the_source_and_its_text() {
        let parse = "x".parse::<u32>().unwrap_err();
        let error = permanent(parse.clone());
        assert_eq!(error.kind(), ErrorKind::Permanent);
        assert_eq!(error.to_string(), parse.to_string());
        assert_eq!(
            error.source().downcast_ref::<std::num::ParseIntError>(),
            Some(&parse)
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("exporting the orders")]
    struct Export(#[source] std::io::Error);

    #[test]
    fn the_message_names_every_source() {
        let io = std::io::Error::other("connection reset");
        let error = JobError::from(Export(io));
        assert_eq!(error.message(), "exporting the orders: connection reset");
    }

    #[test]
    fn a_message_is_an_error_of_its_own() {
        let error = JobError::retryable(format!("upstream answered {}", 503));
        assert_eq!(error.to_string(), "upstream answered 503");
        assert!(error.is_retryable());
        assert_eq!(JobError::permanent("bad"), JobError::permanent("bad"));
        assert_ne!(JobError::permanent("bad"), JobError::retryable("bad"));
    }
}
