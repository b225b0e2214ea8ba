//! What a handler answers: a page, or an error page with the status that fits.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::cli::UsageError;

/// A page that could not be made: its error, said on a page with the right status.
pub(crate) struct PageError {
    status: StatusCode,
    message: String,
}

impl PageError {
    /// Something the request named that is not there (404).
    pub fn not_found(message: impl Into<String>) -> PageError {
        PageError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    /// A request that cannot be served as it is (400).
    pub fn bad(message: impl Into<String>) -> PageError {
        PageError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }
}

impl From<anyhow::Error> for PageError {
    fn from(e: anyhow::Error) -> PageError {
        let status = if e.downcast_ref::<UsageError>().is_some() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        PageError {
            status,
            message: format!("{e:#}"),
        }
    }
}

impl From<schedkit::ops::OpsError> for PageError {
    fn from(e: schedkit::ops::OpsError) -> PageError {
        anyhow::Error::from(e).into()
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let body = maud::html! {
            (maud::DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    title { "error · schedkit" }
                    link rel="stylesheet" href="/assets/ui.css";
                }
                body { main {
                    h1 { "That did not work" }
                    p.error role="alert" { (self.message) }
                    p { a href="/" { "Back to the overview" } }
                } }
            }
        };
        (self.status, body).into_response()
    }
}

/// What a handler answers.
pub(crate) type Page = Result<maud::Markup, PageError>;
