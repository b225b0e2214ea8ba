//! One place that loads the AWS SDK configuration, so every binary resolves region,
//! credentials and endpoint the same way (`AWS_ENDPOINT_URL` points everything at
//! LocalStack; per-service `AWS_ENDPOINT_URL_<SERVICE>` variables work too).

use aws_config::{BehaviorVersion, SdkConfig};

/// The SDK configuration from the environment, profile and instance metadata, in the SDK's
/// standard order.
pub async fn load_config() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest()).load().await
}

use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};

/// One readable line for an SDK error: `Code: message` for a service's answer, the cause
/// chain for everything else (timeouts, connection refused, missing credentials). The
/// SDK's own `Display` says only "service error", and its `DisplayErrorContext` appends
/// the whole chain again in `Debug` form.
pub fn describe<E, R>(err: &SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
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
        other => cause_chain(other),
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `outer: inner: root`, each error's own `Display`, skipping a cause whose text its
/// parent already contains.
fn cause_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.last().is_some_and(|last| last.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sqs::error::ConnectorError;
    use aws_sdk_sqs::operation::get_queue_url::GetQueueUrlError;

    #[test]
    fn a_connection_failure_is_its_cause_chain_without_debug_output() {
        let refused =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let err: SdkError<GetQueueUrlError, ()> =
            SdkError::dispatch_failure(ConnectorError::io(Box::new(refused)));
        let text = describe(&err);
        assert_eq!(text, "dispatch failure: io error: Connection refused");
    }
}
