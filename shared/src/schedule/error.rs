//! Expression errors that say where and what was expected.

/// An invalid schedule expression: which field, at which character, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid schedule expression `{expression}`{}at position {position}: {message}", field.map(|f| format!(": {f} field ")).unwrap_or_else(|| " ".into()))]
pub struct ExpressionError {
    /// The whole expression as given, `cron(...)` included.
    pub expression: String,
    /// The cron field (`minutes`, `hours`, ...), when the problem is in one.
    pub field: Option<&'static str>,
    /// 0-based character offset in the expression.
    pub position: usize,
    /// What is wrong or what was expected there.
    pub message: String,
}

impl ExpressionError {
    /// An error at `position` in `expression`, in `field` if given.
    pub fn new(
        expression: &str,
        field: Option<&'static str>,
        position: usize,
        message: String,
    ) -> Self {
        ExpressionError {
            expression: expression.to_string(),
            field,
            position,
            message,
        }
    }
}

/// A time zone name that is not in the IANA database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an IANA time zone name (e.g. Europe/Berlin, America/New_York, UTC)")]
pub struct TimezoneError(pub String);
