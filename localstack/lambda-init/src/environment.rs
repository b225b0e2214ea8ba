//! One execution environment: a function's `bootstrap` process, the Runtime API it polls,
//! and the rules Lambda applies around an invocation: the function timeout ("Task timed
//! out", then a fresh bootstrap), a crashed bootstrap reported as an error (then a fresh
//! one), and the START / END / REPORT log lines around the function's own output.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::config::FunctionConfig;
use crate::report;
use crate::runtime_api::{Answer, Event, RuntimeApi};

/// One invocation request.
#[derive(Debug, Clone)]
pub struct Invoke {
    pub request_id: String,
    pub payload: Bytes,
    pub function_arn: String,
    pub trace_id: String,
}

/// How an invocation ended, as LocalStack (or a test) receives it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Response(Bytes),
    /// A function error: the JSON body (`errorMessage`, `errorType`, ...).
    Error(Bytes),
}

/// An invocation's outcome and its log text.
#[derive(Debug, Clone)]
pub struct Invoked {
    pub outcome: Outcome,
    pub logs: String,
    pub duration: Duration,
    pub timed_out: bool,
}

/// How long a bootstrap may take to ask for its first event when an environment starts
/// (AWS's init limit), unless the function's own timeout is longer.
const INIT_LIMIT: Duration = Duration::from_secs(10);

/// Why an environment could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The bootstrap could not be started at all.
    #[error("could not start the bootstrap: {0}")]
    Spawn(String),
    /// The bootstrap reported `/runtime/init/error`.
    #[error(
        "the bootstrap reported an init error: {}",
        String::from_utf8_lossy(body)
    )]
    InitError {
        body: Bytes,
        error_type: Option<String>,
        logs: String,
    },
    /// The bootstrap exited before asking for its first event.
    #[error("the bootstrap exited during init ({status})")]
    Exited { status: String, logs: String },
    /// The bootstrap did not ask for its first event in time (it was ended).
    #[error("the bootstrap did not finish its init within {:.2} seconds", limit.as_secs_f64())]
    TimedOut { limit: Duration, logs: String },
}

impl StartError {
    /// `{"errorMessage", "errorType"}` for LocalStack's status/error callback.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            StartError::Spawn(e) => {
                serde_json::json!({"errorType": "Runtime.InvalidEntrypoint", "errorMessage": e})
            }
            StartError::InitError {
                body, error_type, ..
            } => {
                let message = serde_json::from_slice::<serde_json::Value>(body)
                    .ok()
                    .and_then(|v| {
                        v.get("errorMessage")
                            .and_then(|m| m.as_str())
                            .map(str::to_owned)
                    })
                    .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
                serde_json::json!({
                    "errorType": error_type.clone().unwrap_or_else(|| "Runtime.Unknown".into()),
                    "errorMessage": message,
                })
            }
            StartError::Exited { status, .. } => serde_json::json!({
                "errorType": "Runtime.ExitError",
                "errorMessage": format!("Runtime exited without providing a reason: {status}"),
            }),
            StartError::TimedOut { .. } => serde_json::json!({
                "errorType": "Sandbox.Timedout",
                "errorMessage": self.to_string(),
            }),
        }
    }
}

/// Output lines of the current bootstrap, collected per invocation.
#[derive(Default)]
struct Output {
    lines: Mutex<Vec<String>>,
    /// Pipe readers in the middle of a poll: they may hold output read from a pipe and
    /// not yet pushed to `lines`.
    reading: AtomicUsize,
}

impl Output {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.lines.lock().unwrap())
    }
}

struct Bootstrap {
    child: Child,
    /// Duplicates of the bootstrap's stdout and stderr pipes, to see when they are drained.
    pipes: Vec<OwnedFd>,
    api: RuntimeApi,
    answers: mpsc::UnboundedReceiver<Answer>,
    /// Polls of `/next` seen so far; the next invocation starts once there is one more.
    polls: u64,
    init_duration: Option<Duration>,
}

/// A running execution environment.
pub struct Environment {
    config: FunctionConfig,
    output: Arc<Output>,
    bootstrap: Option<Bootstrap>,
}

impl Environment {
    /// Starts the bootstrap and waits until it asks for its first event (initialised).
    pub async fn start(config: FunctionConfig) -> Result<Environment, StartError> {
        // AWS gives an init 10 s; this is lenient with functions allowed longer.
        let limit = config.timeout.max(INIT_LIMIT);
        let mut env = Environment {
            config,
            output: Arc::default(),
            bootstrap: None,
        };
        env.spawn(limit).await?;
        Ok(env)
    }

    /// The current bootstrap's process id.
    pub fn bootstrap_pid(&self) -> Option<u32> {
        self.bootstrap.as_ref().and_then(|b| b.child.id())
    }

    /// Starts a bootstrap and waits, at most `limit`, until it asks for its first event.
    async fn spawn(&mut self, limit: Duration) -> Result<(), StartError> {
        self.bootstrap = None;
        self.output.take();
        let started = Instant::now();
        let (api, mut answers) = RuntimeApi::start()
            .await
            .map_err(|e| StartError::Spawn(format!("runtime API: {e}")))?;
        let mut child = Command::new(&self.config.bootstrap)
            .current_dir(&self.config.task_root)
            .env_clear()
            .envs(self.config.env.iter().cloned())
            .env("AWS_LAMBDA_RUNTIME_API", api.address())
            .env("LAMBDA_TASK_ROOT", &self.config.task_root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| StartError::Spawn(format!("{}: {e}", self.config.bootstrap.display())))?;
        let pipes = [
            collect(child.stdout.take(), self.output.clone()),
            collect(child.stderr.take(), self.output.clone()),
        ]
        .into_iter()
        .flatten()
        .collect();

        let logs = |out: &Output| out.take().join("\n");
        tokio::select! {
            _ = api.polled(1) => {}
            status = child.wait() => {
                settle().await;
                let status = status.map(describe).unwrap_or_else(|e| e.to_string());
                return Err(StartError::Exited { status, logs: logs(&self.output) });
            }
            Some(Answer::InitError { body, error_type }) = answers.recv() => {
                let _ = child.start_kill();
                settle().await;
                return Err(StartError::InitError { body, error_type, logs: logs(&self.output) });
            }
            _ = tokio::time::sleep(limit) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                settle().await;
                return Err(StartError::TimedOut { limit, logs: logs(&self.output) });
            }
        }
        self.bootstrap = Some(Bootstrap {
            child,
            pipes,
            api,
            answers,
            polls: 1,
            init_duration: Some(started.elapsed()),
        });
        Ok(())
    }

    /// Runs one invocation to its end: a response, a function error, a crash or a timeout.
    pub async fn invoke(&mut self, invoke: Invoke) -> Invoked {
        let started = Instant::now();
        let deadline = started + self.config.timeout;
        if self.bootstrap.is_none()
            && let Err(e) = self.spawn(self.config.timeout).await
        {
            // The previous bootstrap died and a new one cannot start: an init failure.
            return self.init_failure(&invoke, started, e);
        }
        // Wait until the bootstrap asks for the next event. It may have died while idle
        // (after answering the previous invocation): AWS starts a new one for the next
        // invocation, and so does this. It may also hang without asking: the deadline
        // still holds.
        let exited_idle = {
            let bootstrap = self.bootstrap.as_mut().expect("spawned above");
            match bootstrap.child.try_wait() {
                // Died while waiting for its next event.
                Ok(Some(_)) | Err(_) => true,
                Ok(None) => tokio::select! {
                    _ = bootstrap.api.polled(bootstrap.polls) => false,
                    _ = bootstrap.child.wait() => true,
                    _ = tokio::time::sleep_until(deadline.into()) => false,
                },
            }
        };
        if exited_idle {
            settle().await;
            self.output.take();
            let left = deadline.saturating_duration_since(Instant::now());
            if let Err(e) = self.spawn(left).await {
                return self.init_failure(&invoke, started, e);
            }
        }
        let bootstrap = self.bootstrap.as_mut().expect("running");
        self.output.take();
        bootstrap.api.send(Event {
            request_id: invoke.request_id.clone(),
            payload: invoke.payload.clone(),
            deadline_ms: chrono::Utc::now().timestamp_millis()
                + self.config.timeout.as_millis() as i64,
            function_arn: invoke.function_arn.clone(),
            trace_id: invoke.trace_id.clone(),
        });

        enum End {
            Answered(Outcome),
            Crashed(String),
            TimedOut,
        }
        let end = loop {
            tokio::select! {
                answer = bootstrap.answers.recv() => match answer {
                    Some(Answer::Response { request_id, body }) if request_id == invoke.request_id => {
                        break End::Answered(Outcome::Response(body));
                    }
                    Some(Answer::Error { request_id, body, error_type }) if request_id == invoke.request_id => {
                        break End::Answered(Outcome::Error(error_body(body, error_type)));
                    }
                    Some(_) => continue, // a stale answer (another request id)
                    None => break End::Crashed("runtime API stopped".into()),
                },
                status = bootstrap.child.wait() => {
                    break End::Crashed(status.map(describe).unwrap_or_else(|e| e.to_string()));
                }
                _ = tokio::time::sleep_until(deadline.into()) => break End::TimedOut,
            }
        };
        let duration = started.elapsed();
        let memory_kb = bootstrap.child.id().map(peak_rss_kb).unwrap_or(0);
        let init = bootstrap.init_duration.take();
        let (outcome, extra, timed_out) = match end {
            End::Answered(outcome) => {
                bootstrap.polls += 1;
                (outcome, None, false)
            }
            End::Crashed(status) => {
                let message = format!(
                    "RequestId: {} Error: Runtime exited with error: {status}",
                    invoke.request_id
                );
                let body =
                    serde_json::json!({"errorType": "Runtime.ExitError", "errorMessage": message});
                self.bootstrap = None;
                (
                    Outcome::Error(Bytes::from(body.to_string())),
                    Some(message),
                    false,
                )
            }
            End::TimedOut => {
                let message = format!(
                    "{} {} Task timed out after {:.2} seconds",
                    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    invoke.request_id,
                    self.config.timeout.as_secs_f64()
                );
                let body =
                    serde_json::json!({"errorType": "Sandbox.Timedout", "errorMessage": message});
                if let Some(mut b) = self.bootstrap.take() {
                    let _ = b.child.start_kill();
                    let _ = b.child.wait().await;
                }
                (
                    Outcome::Error(Bytes::from(body.to_string())),
                    Some(message),
                    true,
                )
            }
        };
        match &self.bootstrap {
            Some(b) => drained(&b.pipes, &self.output).await,
            None => settle().await, // it exited: its pipes are at their end
        }
        let mut output = self.output.take();
        output.extend(extra);
        let logs = report::lines(
            &invoke.request_id,
            &self.config,
            &output,
            duration,
            init,
            memory_kb,
            timed_out.then_some("timeout"),
        );
        // A bootstrap that crashed or timed out is replaced when the next invocation comes
        // (a cold start then, as on AWS), not now: this answer does not wait for its init.
        Invoked {
            outcome,
            logs,
            duration,
            timed_out,
        }
    }

    /// The answer to an invocation whose bootstrap could not be started.
    fn init_failure(&self, invoke: &Invoke, started: Instant, e: StartError) -> Invoked {
        Invoked {
            outcome: Outcome::Error(Bytes::from(e.to_json().to_string())),
            logs: report::lines(
                &invoke.request_id,
                &self.config,
                &[],
                started.elapsed(),
                None,
                0,
                None,
            ),
            duration: started.elapsed(),
            timed_out: false,
        }
    }

    /// Ends the bootstrap.
    pub async fn shutdown(&mut self) {
        if let Some(mut b) = self.bootstrap.take() {
            let _ = b.child.start_kill();
            let _ = b.child.wait().await;
        }
    }
}

/// The error body the Invoke API returns: the function's JSON, with the error type from the
/// runtime's header when the body does not carry one.
fn error_body(body: Bytes, error_type: Option<String>) -> Bytes {
    match (
        serde_json::from_slice::<serde_json::Value>(&body),
        error_type,
    ) {
        (Ok(serde_json::Value::Object(mut map)), Some(t)) if !map.contains_key("errorType") => {
            map.insert("errorType".into(), serde_json::Value::String(t));
            Bytes::from(serde_json::Value::Object(map).to_string())
        }
        (Ok(_), _) => body,
        (Err(_), t) => Bytes::from(
            serde_json::json!({
                "errorType": t.unwrap_or_else(|| "Runtime.Unknown".into()),
                "errorMessage": String::from_utf8_lossy(&body),
            })
            .to_string(),
        ),
    }
}

/// Reads a pipe line by line into `output`, echoing each line to our stderr so whoever
/// started the init (LocalStack's executor) keeps the environment's whole log. Returns a
/// duplicate of the pipe's descriptor, for [`drained`].
fn collect<R>(pipe: Option<R>, output: Arc<Output>) -> Option<OwnedFd>
where
    R: AsyncRead + AsFd + Unpin + Send + 'static,
{
    let pipe = pipe?;
    let fd = pipe.as_fd().try_clone_to_owned().ok();
    let reader = {
        let output = output.clone();
        async move {
            let mut lines = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("{line}");
                output.lines.lock().unwrap().push(line);
            }
        }
    };
    tokio::spawn(Counted {
        output,
        inner: Box::pin(reader),
    });
    fd
}

/// A reader counted in [`Output::reading`] while it is being polled: within one poll it
/// reads what the pipe holds and pushes every whole line of it, so a reader outside a poll
/// holds nothing unpushed (but a last line without its newline).
struct Counted {
    output: Arc<Output>,
    inner: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
}

impl std::future::Future for Counted {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        self.output.reading.fetch_add(1, Ordering::SeqCst);
        let polled = self.inner.as_mut().poll(cx);
        self.output.reading.fetch_sub(1, Ordering::SeqCst);
        polled
    }
}

/// Waits until the readers have taken everything out of the pipes and pushed it: the
/// pipes are empty and no reader is in the middle of a poll. The bootstrap writes its
/// output before it posts its answer, so the invocation's output is then all in `output`.
/// At most 100 ms: a reader descheduled that long on a loaded machine loses its lines
/// rather than holding the answer (a yield at a time, so a reader on this thread runs).
async fn drained(pipes: &[OwnedFd], output: &Output) {
    let pending = |fd: &OwnedFd| {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int through the pointer we pass.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n) };
        rc == 0 && n > 0
    };
    let deadline = Instant::now() + Duration::from_millis(100);
    while (pipes.iter().any(pending) || output.reading.load(Ordering::SeqCst) > 0)
        && Instant::now() < deadline
    {
        tokio::task::yield_now().await;
    }
}

/// Lets the pipe readers catch up with the output of a bootstrap that has just exited.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(5)).await;
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        _ => status.to_string(),
    }
}

fn peak_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
