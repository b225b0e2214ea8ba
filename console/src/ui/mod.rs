//! `schedkit ui`: the operator's web page, served by the console binary.
//!
//! Every page reads through the same library calls as the console's commands (the
//! `status` report, the records' indexes, the chain views, the DLQ's peek), and every
//! action is the command's own function ([`crate::cli`]): confirmed on a page that says
//! what will change, then run as `--yes` would, audited with this server's AWS identity.
//! Pages are server-rendered HTML and SVG with their stylesheet in the binary: no
//! JavaScript, nothing fetched from elsewhere.

mod access;
mod actions;
mod audit_page;
mod chains;
mod dlq;
mod html;
mod jobs;
mod once;
mod overview;
mod runs;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clap::Args;
use schedkit::aws::SdkConfig;
use schedkit::catalog::Catalog;
use schedkit::ops::stage::Stage;

use crate::cli::{Globals, UsageError};
pub use access::Access;

#[derive(Debug, Args)]
pub struct UiArgs {
    /// Where to listen. Loopback by default; any other address needs --token.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// The access token every request must carry (given once in the printed URL, then kept
    /// in a cookie); `generate` makes one, as does none on loopback. Required beyond
    /// loopback. Letters, digits and . _ ~ -, at least 16.
    #[arg(long, env = "SCHEDKIT_UI_TOKEN")]
    pub token: Option<String>,
}

/// What every handler reads: the flags (for the actions, which are the commands'), the
/// stage's resources and the catalog.
pub(crate) struct Ui {
    pub globals: Globals,
    pub sdk: SdkConfig,
    pub stage: Stage,
    pub catalog: Catalog,
    pub access: Arc<Access>,
    /// The confirmations issued, each usable once, and what the used ones did.
    pub confirmations: once::Confirmations,
}

pub(crate) type Shared = Arc<Ui>;

impl Ui {
    /// The frame of a page in `section`.
    pub fn frame<'a>(&'a self, title: &'a str, section: &'a str) -> html::Frame<'a> {
        html::Frame {
            title,
            section,
            stage: &self.stage.stage,
            refresh: None,
        }
    }
}

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

/// Every route, behind the access guards, with the headers that keep the page to itself.
pub(crate) fn router(ui: Shared) -> Router {
    let access = ui.access.clone();
    Router::new()
        .route("/", get(overview::page))
        .route("/jobs", get(jobs::list))
        .route("/jobs/{job}", get(jobs::one))
        .route("/executions", get(runs::list))
        .route("/run", get(runs::one))
        .route("/chains", get(chains::list))
        .route("/chain", get(chains::one))
        .route("/dlq", get(dlq::list))
        .route("/dlq/letter", get(dlq::one))
        .route("/audit", get(audit_page::page))
        .route("/help", get(overview::help))
        .route("/confirm", get(actions::confirm))
        .route("/act", axum::routing::post(actions::act))
        .route("/done", get(actions::done))
        .route("/assets/ui.css", get(css))
        .route("/assets/icon.svg", get(icon))
        // The guard inside the headers: its refusals and redirects get them too.
        .layer(axum::middleware::from_fn_with_state(access, access::guard))
        .layer(axum::middleware::from_fn(secure_headers))
        .with_state(ui)
}

async fn css() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        html::STYLE,
    )
}

async fn icon() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "image/svg+xml")], html::ICON)
}

/// Nothing but this server's own stylesheet and images; no framing; no referrer (a URL
/// may carry the access token); forms post only here.
async fn secure_headers(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// Serves the page until interrupted: resolves the stage, binds, prints the URL to open.
pub async fn run(a: &UiArgs, cli: &Globals) -> anyhow::Result<()> {
    // Refused before anything else: a non-loopback address without a token never listens.
    Access::decide(a.listen, a.token.as_deref())?;
    let catalog = crate::cli::load_catalog(cli)?;
    let sdk = cli.aws.sdk_config().await;
    let stage = cli.target.resolve(&sdk).await?;
    let listener = tokio::net::TcpListener::bind(a.listen)
        .await
        .map_err(|e| UsageError(format!("--listen {}: {e}", a.listen)))?;
    let bound = listener.local_addr()?;
    let access = Arc::new(Access::decide(bound, a.token.as_deref())?);
    let url = access.url(bound);
    let ui = Arc::new(Ui {
        globals: cli.clone(),
        sdk,
        stage,
        catalog,
        access,
        confirmations: once::Confirmations::default(),
    });
    // The first line of stdout is the URL (scripts and tests read it).
    println!("schedkit ui: {url}");
    eprintln!(
        "schedkit ui: stage {} on {bound}; every action is audited as this process's AWS identity; Ctrl-C stops",
        ui.stage.stage
    );
    use std::io::Write;
    std::io::stdout().flush()?;
    axum::serve(listener, router(ui))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
