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
mod page;
mod runs;
mod state;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::cli::ui_cmd::UiArgs;
use crate::cli::{Globals, UsageError};
pub use access::Access;
use state::{Shared, Ui};

/// Every route, behind the access guards, with the headers that keep the page to itself.
fn router(ui: Shared) -> Router {
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
