//! Lambda mode: SQS batch events in, partial batch responses out.

use std::future::Future;
use std::process::ExitCode;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent, service_fn};

use crate::batch::{Processor, batch_response};

/// Serves SQS events until the runtime ends or `shutdown` resolves (Lambda sends SIGTERM
/// when it retires an environment that has extensions; a container platform always does).
pub async fn serve(processor: Processor, shutdown: impl Future<Output = ()>) -> ExitCode {
    let runtime = lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let processor = processor.clone();
        async move { Ok::<_, Error>(handle(&processor, event).await) }
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
