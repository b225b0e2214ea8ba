//! `schedkit-lambda-init`: started by the executor plugin, one per execution environment.
//!
//! Environment: LocalStack's (`LOCALSTACK_RUNTIME_ENDPOINT`, `LOCALSTACK_RUNTIME_ID`,
//! `AWS_LAMBDA_FUNCTION_TIMEOUT`, ...) plus `SCHEDKIT_INIT_CODE_DIR`, the unzipped code.
//! The first line on stdout is the port of the invoke endpoint; everything the bootstrap
//! prints follows on stderr.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use schedkit_lambda_init::FunctionConfig;
use schedkit_lambda_init::environment::Environment;
use schedkit_lambda_init::localstack::{Callbacks, bind, serve_invocations};

/// Variables for the init only, never passed to the function.
fn is_init_variable(name: &str) -> bool {
    name.starts_with("LOCALSTACK_") || name.starts_with("SCHEDKIT_INIT_")
}

fn required(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("schedkit-lambda-init: {name} is not set"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let endpoint = required("LOCALSTACK_RUNTIME_ENDPOINT")?;
    let runtime_id = required("LOCALSTACK_RUNTIME_ID")?;
    let code = PathBuf::from(required("SCHEDKIT_INIT_CODE_DIR")?);
    let number = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let config = FunctionConfig {
        bootstrap: code.join("bootstrap"),
        task_root: code,
        env: std::env::vars()
            .filter(|(k, _)| !is_init_variable(k))
            .collect(),
        timeout: Duration::from_secs(number("AWS_LAMBDA_FUNCTION_TIMEOUT", 3)),
        memory_mb: number("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", 128) as u32,
        version: std::env::var("AWS_LAMBDA_FUNCTION_VERSION").unwrap_or_else(|_| "$LATEST".into()),
    };

    let (listener, addr) = bind().await.map_err(|e| format!("invoke endpoint: {e}"))?;
    println!("{}", addr.port());
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let mut invocations = serve_invocations(listener);
    let callbacks = Callbacks::new(endpoint, runtime_id);
    watch_parent();

    let mut environment = match Environment::start(config).await {
        Ok(env) => env,
        Err(e) => {
            let _ = callbacks.init_error(&e.to_json()).await;
            return Err(e.to_string());
        }
    };
    callbacks.ready().await?;

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| e.to_string())?;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            invoke = invocations.recv() => {
                let Some(invoke) = invoke else { break };
                let request_id = invoke.request_id.clone();
                let invoked = environment.invoke(invoke).await;
                if let Err(e) = callbacks.finish(&request_id, &invoked).await {
                    eprintln!("schedkit-lambda-init: could not report {request_id}: {e}");
                }
            }
        }
    }
    environment.shutdown().await;
    Ok(())
}

/// Ends this environment when the process that started us goes away, so a LocalStack
/// killed hard leaves nothing behind: the executor makes us a process-group leader, and
/// the bootstrap shares our group.
fn watch_parent() {
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(500));
            if std::os::unix::process::parent_id() != parent {
                // SAFETY: plain syscalls with no memory arguments.
                unsafe {
                    if libc::getpgrp() == libc::getpid() {
                        libc::kill(0, libc::SIGKILL);
                    }
                }
                std::process::exit(1);
            }
        }
    });
}
