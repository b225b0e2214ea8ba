//! A small Lambda Runtime API emulator: enough of `/2018-06-01/runtime/...` for a
//! `bootstrap` built on `lambda_runtime` to take invocations and answer them, so the worker
//! binary can be tested in Lambda mode without Lambda.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::routing::{get, post};
use tokio::sync::{mpsc, oneshot};

/// What the function answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Invocation {
    Response(serde_json::Value),
    Error(serde_json::Value),
}

struct Event {
    request_id: String,
    payload: String,
}

#[derive(Clone)]
struct Shared {
    events: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Event>>>,
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<Invocation>>>>,
    init_error: Arc<Mutex<Option<String>>>,
}

/// The emulator, serving on an ephemeral port of 127.0.0.1.
pub struct RuntimeApi {
    addr: SocketAddr,
    events: mpsc::UnboundedSender<Event>,
    shared: Shared,
    server: tokio::task::AbortHandle,
}

impl RuntimeApi {
    pub async fn start() -> std::io::Result<RuntimeApi> {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Shared {
            events: Arc::new(tokio::sync::Mutex::new(rx)),
            waiting: Arc::default(),
            init_error: Arc::default(),
        };
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        })
        .abort_handle();
        Ok(RuntimeApi {
            addr,
            events: tx,
            shared,
            server,
        })
    }

    /// The value for `AWS_LAMBDA_RUNTIME_API` (host:port, no scheme).
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// Queues one invocation and waits for the function's answer.
    pub async fn invoke(
        &self,
        payload: &serde_json::Value,
        timeout: Duration,
    ) -> Result<Invocation, String> {
        let request_id = uuid::Uuid::new_v4().to_string();
        let (tx, rx) = oneshot::channel();
        self.shared
            .waiting
            .lock()
            .unwrap()
            .insert(request_id.clone(), tx);
        self.events
            .send(Event {
                request_id,
                payload: payload.to_string(),
            })
            .map_err(|_| "emulator stopped".to_string())?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err("invocation dropped".into()),
            Err(_) => Err(format!(
                "no answer within {timeout:?} (init error: {:?})",
                self.shared.init_error.lock().unwrap()
            )),
        }
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn next(State(s): State<Shared>) -> Result<(HeaderMap, String), StatusCode> {
    let event = s.events.lock().await.recv().await.ok_or(StatusCode::GONE)?;
    let deadline = chrono::Utc::now().timestamp_millis() + 60_000;
    let mut headers = HeaderMap::new();
    let mut set = |name: &'static str, value: String| {
        headers.insert(name, HeaderValue::from_str(&value).expect("ascii header"));
    };
    set("lambda-runtime-aws-request-id", event.request_id);
    set("lambda-runtime-deadline-ms", deadline.to_string());
    set(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:000000000000:function:schedkit-worker".into(),
    );
    set(
        "lambda-runtime-trace-id",
        "Root=1-00000000-000000000000000000000000;Sampled=0".into(),
    );
    Ok((headers, event.payload))
}

fn answer(
    s: &Shared,
    id: &str,
    body: &Bytes,
    wrap: fn(serde_json::Value) -> Invocation,
) -> StatusCode {
    let value = serde_json::from_slice(body)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(body).into_owned()));
    match s.waiting.lock().unwrap().remove(id) {
        Some(tx) => {
            let _ = tx.send(wrap(value));
            StatusCode::ACCEPTED
        }
        None => StatusCode::NOT_FOUND,
    }
}

async fn response(State(s): State<Shared>, Path(id): Path<String>, body: Bytes) -> StatusCode {
    answer(&s, &id, &body, Invocation::Response)
}

async fn error(State(s): State<Shared>, Path(id): Path<String>, body: Bytes) -> StatusCode {
    answer(&s, &id, &body, Invocation::Error)
}

async fn init_error(State(s): State<Shared>, body: Bytes) -> StatusCode {
    *s.init_error.lock().unwrap() = Some(String::from_utf8_lossy(&body).into_owned());
    StatusCode::ACCEPTED
}
