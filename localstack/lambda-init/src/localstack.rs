//! LocalStack's side of the init: the `/invoke` endpoint it posts invocations to, and the
//! callbacks the init makes (`status/ready`, `status/error`, `invocations/{id}/logs`, then
//! `/response` or `/error`; logs always before the result, or LocalStack loses them).

use std::net::SocketAddr;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::environment::{Invoke, Invoked, Outcome};

/// The body LocalStack posts to `/invoke`.
#[derive(Debug, Deserialize)]
pub struct InvokeRequest {
    #[serde(rename = "invoke-id")]
    pub invoke_id: String,
    #[serde(rename = "invoked-function-arn", default)]
    pub invoked_function_arn: String,
    #[serde(default)]
    pub payload: String,
    #[serde(rename = "trace-id", default)]
    pub trace_id: String,
}

impl From<InvokeRequest> for Invoke {
    fn from(r: InvokeRequest) -> Invoke {
        Invoke {
            request_id: r.invoke_id,
            payload: Bytes::from(r.payload),
            function_arn: r.invoked_function_arn,
            trace_id: r.trace_id,
        }
    }
}

/// Serves `POST /invoke` on `listener`: each request is queued and answered 200 at once;
/// the outcome goes back through the callbacks.
pub fn serve_invocations(listener: tokio::net::TcpListener) -> mpsc::UnboundedReceiver<Invoke> {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = Router::new().route("/invoke", post(invoke)).with_state(tx);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    rx
}

async fn invoke(State(tx): State<mpsc::UnboundedSender<Invoke>>, body: Bytes) -> StatusCode {
    match serde_json::from_slice::<InvokeRequest>(&body) {
        Ok(req) => {
            let _ = tx.send(req.into());
            StatusCode::OK
        }
        Err(_) => StatusCode::BAD_REQUEST,
    }
}

/// The callbacks to LocalStack, under `LOCALSTACK_RUNTIME_ENDPOINT`.
pub struct Callbacks {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    runtime_id: String,
}

impl Callbacks {
    pub fn new(base: impl Into<String>, runtime_id: impl Into<String>) -> Self {
        Callbacks {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base: base.into().trim_end_matches('/').to_string(),
            runtime_id: runtime_id.into(),
        }
    }

    pub async fn ready(&self) -> Result<(), String> {
        self.post(&format!("/status/{}/ready", self.runtime_id), Bytes::new())
            .await
    }

    pub async fn init_error(&self, error: &serde_json::Value) -> Result<(), String> {
        self.post(
            &format!("/status/{}/error", self.runtime_id),
            Bytes::from(error.to_string()),
        )
        .await
    }

    /// Logs first, then the result.
    pub async fn finish(&self, request_id: &str, invoked: &Invoked) -> Result<(), String> {
        let logs = serde_json::json!({ "logs": invoked.logs });
        self.post(
            &format!("/invocations/{request_id}/logs"),
            Bytes::from(logs.to_string()),
        )
        .await?;
        let (kind, body) = match &invoked.outcome {
            Outcome::Response(b) => ("response", b.clone()),
            Outcome::Error(b) => ("error", b.clone()),
        };
        self.post(&format!("/invocations/{request_id}/{kind}"), body)
            .await
    }

    async fn post(&self, path: &str, body: Bytes) -> Result<(), String> {
        let url = format!("{}{path}", self.base);
        let request = hyper::Request::post(&url)
            .header("content-type", "application/json")
            .body(Full::new(body))
            .map_err(|e| format!("{url}: {e}"))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!("{url}: HTTP {}", response.status()))
        }
    }
}

/// Binds the invoke endpoint on an ephemeral port of 127.0.0.1.
pub async fn bind() -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}
