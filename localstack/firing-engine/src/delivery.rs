//! Delivering one firing to its target (SQS, Step Functions, Lambda) as the scheduler
//! would, telling a passing failure from one no retry can cure, and the dead letter the
//! scheduler writes when it gives up.

use std::collections::HashMap;
use std::sync::Mutex;

use aws_config::SdkConfig;
use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::MessageAttributeValue;
use schedkit::dead_letter::SchedulerDeadLetter;

/// Why an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryError {
    /// The target service's error code, when it answered (e.g. `QueueDoesNotExist`).
    pub code: Option<String>,
    /// What went wrong, naming the target.
    pub message: String,
    /// True when no retry can cure it: the target does not exist, access is denied, the
    /// input is refused. The scheduler dead-letters these at once instead of retrying.
    pub permanent: bool,
}

/// Whether an SDK failure is one a retry cannot cure: the target answered with a client
/// error other than throttling. Timeouts, dropped connections, throttling and server
/// errors pass.
fn is_permanent<E, R>(e: &SdkError<E, R>, status: Option<u16>) -> bool
where
    E: ProvideErrorMetadata,
{
    let SdkError::ServiceError(s) = e else {
        return false;
    };
    let code = s.err().code().unwrap_or_default();
    let throttled = code.contains("Throttl")
        || code.contains("TooManyRequests")
        || code == "RequestLimitExceeded"
        || code == "ServiceUnavailable";
    matches!(status, Some(400..=499)) && status != Some(429) && !throttled
}

fn failure<E>(target_arn: &str, e: &SdkError<E, HttpResponse>) -> DeliveryError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let status = e.raw_response().map(|r| r.status().as_u16());
    DeliveryError {
        code: e
            .as_service_error()
            .and_then(|s| s.code())
            .map(str::to_owned),
        message: format!("{target_arn}: {}", schedkit::aws::describe(e)),
        permanent: is_permanent(e, status),
    }
}

fn refused(message: String) -> DeliveryError {
    DeliveryError {
        code: None,
        message,
        permanent: true,
    }
}

/// SDK clients for the targets, built once.
pub struct Targets {
    sqs: aws_sdk_sqs::Client,
    sfn: aws_sdk_sfn::Client,
    lambda: aws_sdk_lambda::Client,
    queue_urls: Mutex<HashMap<String, String>>,
}

impl Targets {
    /// Clients on `sdk`.
    pub fn new(sdk: &SdkConfig) -> Self {
        Targets {
            sqs: aws_sdk_sqs::Client::new(sdk),
            sfn: aws_sdk_sfn::Client::new(sdk),
            lambda: aws_sdk_lambda::Client::new(sdk),
            queue_urls: Mutex::default(),
        }
    }

    /// One attempt to hand `input` to `target_arn`.
    pub async fn deliver(&self, target_arn: &str, input: &str) -> Result<(), DeliveryError> {
        let service = target_arn.split(':').nth(2).unwrap_or_default();
        match service {
            "sqs" => {
                let url = self.queue_url(target_arn).await?;
                self.sqs
                    .send_message()
                    .queue_url(url)
                    .message_body(input)
                    .send()
                    .await
                    .map_err(|e| failure(target_arn, &e))?;
            }
            "states" => {
                self.sfn
                    .start_execution()
                    .state_machine_arn(target_arn)
                    .input(input)
                    .send()
                    .await
                    .map_err(|e| failure(target_arn, &e))?;
            }
            "lambda" => {
                self.lambda
                    .invoke()
                    .function_name(target_arn)
                    .invocation_type(aws_sdk_lambda::types::InvocationType::Event)
                    .payload(aws_sdk_lambda::primitives::Blob::new(input))
                    .send()
                    .await
                    .map_err(|e| failure(target_arn, &e))?;
            }
            other => {
                return Err(refused(format!(
                    "{target_arn}: targets of service `{other}` are not supported by the local engine"
                )));
            }
        }
        Ok(())
    }

    /// The queue URL of an SQS ARN (`arn:aws:sqs:<region>:<account>:<name>`), cached.
    async fn queue_url(&self, arn: &str) -> Result<String, DeliveryError> {
        if let Some(url) = self.queue_urls.lock().unwrap().get(arn) {
            return Ok(url.clone());
        }
        let parts: Vec<&str> = arn.split(':').collect();
        let [_, _, "sqs", _, account, name] = parts[..] else {
            return Err(refused(format!("`{arn}` is not an SQS queue ARN")));
        };
        let url = self
            .sqs
            .get_queue_url()
            .queue_name(name)
            .queue_owner_aws_account_id(account)
            .send()
            .await
            .map_err(|e| failure(arn, &e))?
            .queue_url
            .unwrap_or_default();
        self.queue_urls
            .lock()
            .unwrap()
            .insert(arn.to_string(), url.clone());
        Ok(url)
    }

    /// Sends an undeliverable firing to `dlq_arn` as EventBridge Scheduler does: its input
    /// as the body, and the attributes of [`SchedulerDeadLetter`] (schedkit's one
    /// description of that format).
    pub async fn dead_letter(
        &self,
        dlq_arn: &str,
        letter: &SchedulerDeadLetter<'_>,
    ) -> Result<(), String> {
        let url = self.queue_url(dlq_arn).await.map_err(|e| e.message)?;
        let mut send = self
            .sqs
            .send_message()
            .queue_url(url)
            .message_body(letter.input);
        for (name, value) in letter.attributes() {
            let value = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
                .expect("type and value set");
            send = send.message_attributes(name, value);
        }
        send.send()
            .await
            .map(|_| ())
            .map_err(|e| schedkit::aws::describe(&e))
    }
}
