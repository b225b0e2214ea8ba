//! The Lambda Runtime API (`/2018-06-01/runtime/...`) that a function's `bootstrap` polls.
//!
//! One server per bootstrap process, on an ephemeral port of 127.0.0.1: when a bootstrap is
//! replaced (timeout, crash) its server goes with it, so a request still in flight from the
//! old process can never take an event meant for the new one.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::routing::{get, post};
use tokio::sync::{Mutex, mpsc, watch};

/// One invocation, as handed to the bootstrap by `GET /runtime/invocation/next`.
#[derive(Debug, Clone)]
pub struct Event {
    pub request_id: String,
    pub payload: Bytes,
    /// Epoch milliseconds.
    pub deadline_ms: i64,
    pub function_arn: String,
    pub trace_id: String,
}

/// What the bootstrap posted back.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// `POST /runtime/invocation/{id}/response`
    Response { request_id: String, body: Bytes },
    /// `POST /runtime/invocation/{id}/error`
    Error {
        request_id: String,
        body: Bytes,
        error_type: Option<String>,
    },
    /// `POST /runtime/init/error`
    InitError {
        body: Bytes,
        error_type: Option<String>,
    },
}

#[derive(Clone)]
struct Shared {
    events: Arc<Mutex<mpsc::UnboundedReceiver<Event>>>,
    answers: mpsc::UnboundedSender<Answer>,
    /// How many times the bootstrap has asked for its next event.
    polls: Arc<watch::Sender<u64>>,
}

/// A running Runtime API server.
pub struct RuntimeApi {
    addr: SocketAddr,
    events: mpsc::UnboundedSender<Event>,
    polls: watch::Receiver<u64>,
    server: tokio::task::AbortHandle,
}

impl RuntimeApi {
    /// Starts serving; answers arrive on the returned receiver.
    pub async fn start() -> std::io::Result<(RuntimeApi, mpsc::UnboundedReceiver<Answer>)> {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (answers_tx, answers_rx) = mpsc::unbounded_channel();
        let (polls_tx, polls_rx) = watch::channel(0u64);
        let shared = Shared {
            events: Arc::new(Mutex::new(events_rx)),
            answers: answers_tx,
            polls: Arc::new(polls_tx),
        };
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        })
        .abort_handle();
        let api = RuntimeApi {
            addr,
            events: events_tx,
            polls: polls_rx,
            server,
        };
        Ok((api, answers_rx))
    }

    /// The value of `AWS_LAMBDA_RUNTIME_API`: host and port, no scheme.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// Queues an event for the bootstrap's next poll.
    pub fn send(&self, event: Event) {
        // The receiver lives as long as the server: a send can only fail after `Drop`.
        let _ = self.events.send(event);
    }

    /// Resolves once the bootstrap has polled for its next event at least `count` times.
    pub async fn polled(&self, count: u64) {
        let mut polls = self.polls.clone();
        let _ = polls.wait_for(|n| *n >= count).await;
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn next(State(s): State<Shared>) -> Result<(HeaderMap, Bytes), StatusCode> {
    s.polls.send_modify(|n| *n += 1);
    let event = s.events.lock().await.recv().await.ok_or(StatusCode::GONE)?;
    let mut headers = HeaderMap::new();
    // As AWS's Runtime API says it: runtime clients decode the event by it (awslambdaric
    // hands a handler raw bytes without it).
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for (name, value) in [
        ("lambda-runtime-aws-request-id", event.request_id),
        ("lambda-runtime-deadline-ms", event.deadline_ms.to_string()),
        ("lambda-runtime-invoked-function-arn", event.function_arn),
        ("lambda-runtime-trace-id", event.trace_id),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    }
    Ok((headers, event.payload))
}

fn error_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get("lambda-runtime-function-error-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn response(
    State(s): State<Shared>,
    Path(request_id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let _ = s.answers.send(Answer::Response { request_id, body });
    StatusCode::ACCEPTED
}

async fn error(
    State(s): State<Shared>,
    Path(request_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let error_type = error_type(&headers);
    let _ = s.answers.send(Answer::Error {
        request_id,
        body,
        error_type,
    });
    StatusCode::ACCEPTED
}

async fn init_error(State(s): State<Shared>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let error_type = error_type(&headers);
    let _ = s.answers.send(Answer::InitError { body, error_type });
    StatusCode::ACCEPTED
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Runtime clients decode the event by its content type (awslambdaric hands a Python
    /// handler raw bytes without one), so `/next` says what AWS's Runtime API says.
    #[tokio::test]
    async fn the_next_event_is_served_as_json_with_its_request_headers() {
        let (api, _answers) = RuntimeApi::start().await.unwrap();
        api.send(Event {
            request_id: "r-1".into(),
            payload: Bytes::from_static(br#"{"Records":[]}"#),
            deadline_ms: 1,
            function_arn: "arn:aws:lambda:us-east-1:000000000000:function:f".into(),
            trace_id: "t".into(),
        });
        let mut stream = tokio::net::TcpStream::connect(api.address()).await.unwrap();
        stream
            .write_all(b"GET /2018-06-01/runtime/invocation/next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let lower = response.to_ascii_lowercase();
        assert!(
            lower.contains("content-type: application/json\r\n"),
            "{response}"
        );
        assert!(
            lower.contains("lambda-runtime-aws-request-id: r-1\r\n"),
            "{response}"
        );
        assert!(response.ends_with(r#"{"Records":[]}"#), "{response}");
    }
}
