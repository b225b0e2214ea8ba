//! `schedkit`: parse, dispatch, and turn errors into one line and an exit code
//! (0 success, 1 failure, 2 a problem with the input: fix the command or the catalog).

use std::process::ExitCode;

use clap::Parser;
use schedkit_console::cli::{Cli, Command, UsageError, prepare, run};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_init();
    let stage = cli.globals.target.stage.clone();
    // Traces (a `fire`'s trigger span) when OTEL_EXPORTER_OTLP_ENDPOINT is set.
    schedkit::telemetry::traces::init_exporter();
    let result = match &cli.command {
        // The web page is built on the commands; the binary serves it.
        Command::Ui(a) => {
            prepare(&cli).await;
            schedkit_console::ui::run(a, &cli.globals).await
        }
        _ => run(cli).await,
    };
    let _ = tokio::task::spawn_blocking(schedkit::telemetry::traces::shutdown).await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the whole chain of causes on one line, never a backtrace.
            let error = format!("{e:#}");
            eprintln!("schedkit: error: {error}");
            // A refusal names the permission and the stage's policy that grants it.
            if let Some(hint) = schedkit::iac::roles::refusal_hint(&error, stage.as_deref()) {
                eprintln!("schedkit: {hint}");
            }
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Warnings and errors on stderr (RUST_LOG overrides), so stdout stays for results. The
/// SDK's own warnings (a missing config file...) stay out: its errors reach the user as the
/// command's one-line error.
fn tracing_init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,aws_runtime=error,aws_config=error,aws_smithy_runtime=error",
        )
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
