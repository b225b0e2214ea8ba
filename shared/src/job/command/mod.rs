//! A job whose run is a process: the catalog's `command`, run by a shell as cron runs it.
//!
//! The run's identity goes in its environment (`SCHEDKIT_KEY`, `SCHEDKIT_SCHEDULED_FOR`,
//! `SCHEDKIT_ATTEMPT`, `SCHEDKIT_PAYLOAD`, ...), its output to the worker's log line by line
//! and, its last [`OUTPUT_TAIL_BYTES`], to the record (DONE) or the failure (and so the dead
//! letter). Its exit code is the outcome: 0 DONE, a code the catalog lists as permanent
//! FAILED at once, any other a retryable failure. It runs in a process group of its own:
//! when the attempt ends without it (the job's timeout, a lost lease), the group gets
//! SIGTERM and, after the grace, SIGKILL, so nothing it started outlives the attempt.
//!
//! What "once" covers: schedkit claims the run, so two deliveries do not both start it,
//! and a crash or a lost lease starts it again only after its lease; but what the process
//! itself does is at least once (a retry runs it again). It gets the execution key to make
//! its own side effects idempotent.

mod output;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::SecondsFormat;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

pub use output::{FAILURE_TAIL_BYTES, OUTPUT_TAIL_BYTES};
use output::{Mask, Tail, forward};

use super::context::Ctx;
use super::error::JobError;
use super::handler::{BoxFuture, Job, JobResult};
use crate::catalog::CommandSpec;

/// The longest value one environment variable may hold on Linux (`MAX_ARG_STRLEN`).
const ENV_VALUE_MAX: usize = 128 * 1024;

/// How long the output may still be read once the process has exited (a background child
/// that holds the pipe open is not waited for).
const DRAIN: Duration = Duration::from_secs(1);

/// The catalog's `command` as a job the worker runs.
pub(crate) struct CommandJob {
    spec: Arc<CommandSpec>,
}

impl CommandJob {
    pub(crate) fn new(spec: CommandSpec) -> Self {
        CommandJob {
            spec: Arc::new(spec),
        }
    }
}

impl Job for CommandJob {
    fn run(&self, ctx: Ctx) -> BoxFuture<JobResult> {
        let spec = self.spec.clone();
        Box::pin(async move { run(&spec, &ctx).await })
    }
}

async fn run(spec: &CommandSpec, ctx: &Ctx) -> JobResult {
    let secrets = ctx.all_secrets().await?;
    let mut child = spawn(spec, ctx, &secrets)?;
    let mut group = Group {
        pgid: child.id().map(|id| id as i32),
        grace: Duration::from_secs(u64::from(spec.grace_seconds)),
        ended: false,
    };
    if let (Some(text), Some(mut stdin)) = (&spec.stdin, child.stdin.take()) {
        let text = text.clone();
        tokio::spawn(async move {
            // A process that does not read its input is not an error of the run.
            let _ = stdin.write_all(text.as_bytes()).await;
        });
    }
    let tail = Arc::new(Mutex::new(Tail::default()));
    // What it prints of its secrets is masked before anything keeps or logs it.
    let mask = Arc::new(Mask::of(secrets.iter().map(|(_, value)| value.as_str())));
    let mut readers = tokio::task::JoinSet::new();
    if let Some(out) = child.stdout.take() {
        readers.spawn(forward(
            out,
            "stdout",
            ctx.key.clone(),
            tail.clone(),
            mask.clone(),
        ));
    }
    if let Some(err) = child.stderr.take() {
        readers.spawn(forward(
            err,
            "stderr",
            ctx.key.clone(),
            tail.clone(),
            mask.clone(),
        ));
    }
    let status = child.wait().await;
    group.ended = true;
    let _ = tokio::time::timeout(DRAIN, async {
        while readers.join_next().await.is_some() {}
    })
    .await;
    readers.abort_all();
    let tail = tail.lock().expect("the tail's lock");
    let status =
        status.map_err(|e| JobError::retryable(format!("waiting for the process: {e}")))?;
    outcome(spec, status, &tail)
}

/// The shell and its command in a process group of its own, the run in its environment.
fn spawn(
    spec: &CommandSpec,
    ctx: &Ctx,
    secrets: &[(String, String)],
) -> Result<tokio::process::Child, JobError> {
    let mut command = Command::new(&spec.shell);
    command
        .arg("-c")
        .arg(&spec.run)
        // Not the worker's environment: on Lambda it holds the role's credentials, which
        // may read every job's secrets. What a shell needs, then the job's own.
        .env_clear()
        .envs(kept_from_worker())
        .envs(&spec.env)
        .envs(secrets.iter().map(|(k, v)| (k, v)))
        .envs(environment(ctx))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(dir) = &spec.working_dir {
        command.current_dir(dir);
    }
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe and touches nothing of the parent's: between fork
    // and exec the child asks the kernel for SIGTERM when the worker dies (a worker killed
    // without notice must not leave the process running while another worker reruns it).
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    command.spawn().map_err(|e| {
        let message = format!("could not start `{}` with {}: {e}", spec.run, spec.shell);
        if e.raw_os_error() == Some(libc::E2BIG) {
            // The environment is too large for exec(2): the same run never starts.
            let payload = ctx.payload.to_string().len();
            JobError::permanent(format!(
                "{message}: its environment is too large (SCHEDKIT_PAYLOAD is {payload} bytes; Linux takes at most {ENV_VALUE_MAX} bytes a variable): pass a reference to the data instead"
            ))
        } else {
            JobError::retryable(message)
        }
    })
}

/// The exit status as the run's outcome.
fn outcome(spec: &CommandSpec, status: std::process::ExitStatus, tail: &Tail) -> JobResult {
    let last = tail.last(FAILURE_TAIL_BYTES);
    match status.code() {
        Some(0) => Ok(json!({ "exit_code": 0, "output": tail.text() })),
        Some(code) => {
            let message = format!("exited with code {code}; output: {}", or_none(&last));
            Err(if spec.permanent_exit_codes.contains(&code) {
                JobError::permanent(format!("{message} (a permanent exit code)"))
            } else {
                JobError::retryable(message)
            })
        }
        None => {
            use std::os::unix::process::ExitStatusExt;
            let signal = status.signal().unwrap_or_default();
            Err(JobError::retryable(format!(
                "ended by signal {signal}; output: {}",
                or_none(&last)
            )))
        }
    }
}

fn or_none(output: &str) -> &str {
    if output.is_empty() { "(none)" } else { output }
}

/// The worker's variables a command keeps: what a shell and its programs need to run
/// (the search path, the home, the locale, the zone, the temporary directory, the user)
/// and the AWS Region. Never credentials.
const KEPT: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "USER",
    "LOGNAME",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
];

fn kept_from_worker() -> Vec<(&'static str, String)> {
    let mut kept: Vec<(&'static str, String)> = KEPT
        .iter()
        .filter_map(|name| Some((*name, std::env::var(name).ok()?)))
        .collect();
    if !kept.iter().any(|(name, _)| *name == "PATH") {
        kept.push(("PATH", "/usr/local/bin:/usr/bin:/bin".into()));
    }
    kept
}

/// What the process knows of its run.
fn environment(ctx: &Ctx) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("SCHEDKIT_JOB", ctx.job.clone()),
        ("SCHEDKIT_KEY", ctx.key.clone()),
        (
            "SCHEDKIT_SCHEDULED_FOR",
            ctx.scheduled_for.to_rfc3339_opts(SecondsFormat::Secs, true),
        ),
        ("SCHEDKIT_ATTEMPT", ctx.attempt.to_string()),
        ("SCHEDKIT_PAYLOAD", ctx.payload.to_string()),
    ];
    if let Some(step) = ctx.chain() {
        env.push(("SCHEDKIT_CHAIN", step.chain.clone()));
        env.push(("SCHEDKIT_CHAIN_KEY", step.chain_key.clone()));
        env.push(("SCHEDKIT_STEP", step.step.clone()));
        env.push(("SCHEDKIT_CHAIN_INPUT", step.input.to_string()));
        env.push((
            "SCHEDKIT_STEP_OUTPUTS",
            serde_json::to_string(&step.outputs).unwrap_or_default(),
        ));
    }
    env
}

/// The process group, ended when the attempt ends before the process does.
struct Group {
    pgid: Option<i32>,
    grace: Duration,
    ended: bool,
}

impl Drop for Group {
    fn drop(&mut self) {
        let Some(pgid) = self.pgid.filter(|_| !self.ended) else {
            return;
        };
        // SAFETY: kill(2) with a negative pid signals the group this attempt created.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let grace = self.grace;
        tracing::warn!(
            pgid,
            grace_seconds = grace.as_secs(),
            "attempt ended before its process: SIGTERM to its group"
        );
        std::thread::spawn(move || {
            std::thread::sleep(grace);
            // SAFETY: as above; a group that has ended makes this fail with ESRCH.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_steps_command_sees_the_chain_runs_input_and_earlier_outputs() {
        let (_, lease) = tokio::sync::watch::channel(false);
        let ctx = Ctx::new(
            "load".into(),
            "nightly#2026-12-05#load".into(),
            "2026-12-05T02:00:00Z".parse().unwrap(),
            json!({"table": "orders"}),
            1,
            lease,
            crate::effects::Effects::default(),
        )
        .with_chain(super::super::context::ChainStep {
            chain: "nightly".into(),
            chain_key: "nightly#2026-12-05".into(),
            step: "load".into(),
            input: json!({"day": "2026-12-04"}),
            outputs: [("extract".to_string(), json!({"rows": 3}))].into(),
        });
        let env: std::collections::BTreeMap<_, _> = environment(&ctx).into_iter().collect();
        assert_eq!(env["SCHEDKIT_CHAIN_INPUT"], r#"{"day":"2026-12-04"}"#);
        assert_eq!(env["SCHEDKIT_STEP_OUTPUTS"], r#"{"extract":{"rows":3}}"#);
        assert_eq!(env["SCHEDKIT_PAYLOAD"], r#"{"table":"orders"}"#);
    }
}
