//! The Lambda handler: an SQS batch in, a partial batch response out.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use schedkit::{Processor, batch_response};

/// Serves SQS events until the runtime stops the process.
pub async fn run(processor: Processor) -> Result<(), Error> {
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let processor = processor.clone();
        async move { Ok::<_, Error>(handle(&processor, event).await) }
    }))
    .await
}

async fn handle(processor: &Processor, event: LambdaEvent<SqsEvent>) -> SqsBatchResponse {
    let reports = processor
        .process(event.payload.records, Some(&event.context.request_id))
        .await;
    batch_response(&reports)
}
