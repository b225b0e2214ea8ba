//! Lambda mode: SQS batch events in, partial batch responses out; and the stage's
//! accountant schedule's invocation (`{"schedkit": "account"}`) in, its check out.

use std::future::Future;
use std::process::ExitCode;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use chrono::{DateTime, Utc};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde::{Deserialize, Serialize};

use super::accountant::{Accountant, Summary};
use crate::batch::{Processor, batch_response};

/// What the function is invoked with: the jobs queue's batches, or a command of the
/// stage's own schedules (the accountant's).
#[derive(Deserialize)]
#[serde(untagged)]
enum Invocation {
    /// `{"schedkit": "account", "since": "…"}` (`since` optional).
    Command(Command),
    Batch(SqsEvent),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Command {
    schedkit: CommandName,
    #[serde(default)]
    since: Option<DateTime<Utc>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum CommandName {
    Account,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Answer {
    Batch(SqsBatchResponse),
    Account(Summary),
}

/// Serves SQS events until the runtime ends or `shutdown` resolves (Lambda sends SIGTERM
/// when it retires an environment that has extensions; a container platform always does).
pub(super) async fn serve(
    processor: Processor,
    accountant: Accountant,
    shutdown: impl Future<Output = ()>,
) -> ExitCode {
    let runtime = lambda_runtime::run(service_fn(move |event: LambdaEvent<Invocation>| {
        let processor = processor.clone();
        let accountant = accountant.clone();
        async move {
            let deadline = event.context.deadline();
            let answer = match event.payload {
                Invocation::Batch(batch) => Ok::<_, Error>(Answer::Batch(
                    handle(&processor, LambdaEvent::new(batch, event.context)).await,
                )),
                // A failed check fails the invocation: the scheduler retries it, and the
                // accountant's alarm fires if checks stop.
                Invocation::Command(Command {
                    schedkit: CommandName::Account,
                    since,
                }) => Ok(Answer::Account(accountant.check(since, true).await?.1)),
            };
            // Lambda freezes the process once it answers: the spans go first, but never at
            // the cost of the answer (a collector that does not answer is waited for only
            // while the invocation has time left; what it missed goes with the next).
            let left = deadline
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default()
                .saturating_sub(std::time::Duration::from_millis(500))
                .min(std::time::Duration::from_secs(2));
            let _ = tokio::time::timeout(left, crate::telemetry::traces::flush()).await;
            answer
        }
    }));
    let code = tokio::select! {
        result = runtime => match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %e, "lambda runtime stopped");
                ExitCode::FAILURE
            }
        },
        () = shutdown => ExitCode::SUCCESS,
    };
    tracing::info!(
        peak_rss_kb = super::process::peak_rss_kb(),
        "lambda worker stopped"
    );
    code
}

/// One invocation: the batch ends by the invocation's deadline (the function's timeout
/// from its start), so that no attempt is cut off without its outcome written.
async fn handle(processor: &Processor, event: LambdaEvent<SqsEvent>) -> SqsBatchResponse {
    let left = event
        .context
        .deadline()
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    let deadline = tokio::time::Instant::now() + left;
    let reports = processor
        .process_each(
            event.payload.records,
            Some(&event.context.request_id),
            None,
            Some(deadline),
        )
        .await;
    batch_response(&reports)
}
