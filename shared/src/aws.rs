//! One place that loads the AWS SDK configuration, so every binary resolves region,
//! credentials and endpoint the same way (`AWS_ENDPOINT_URL` points everything at
//! LocalStack; per-service `AWS_ENDPOINT_URL_<SERVICE>` variables work too).

use aws_config::{BehaviorVersion, SdkConfig};

/// The SDK configuration from the environment, profile and instance metadata, in the SDK's
/// standard order.
pub async fn load_config() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest()).load().await
}

use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

/// One readable line for an SDK error: `Code: message` for a service's answer, the cause
/// chain for everything else (timeouts, connection refused, missing credentials). The
/// SDK's own `Display` says only "service error", and its full context dumps the raw
/// response over several lines.
pub fn describe<E, R>(err: &SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let text = match err {
        SdkError::ServiceError(s) => {
            let e = s.err();
            match (e.code(), e.message()) {
                (Some(code), Some(message)) => format!("{code}: {message}"),
                (Some(code), None) => code.to_string(),
                _ => e.to_string(),
            }
        }
        other => DisplayErrorContext(other).to_string(),
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
