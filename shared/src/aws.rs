//! One place that loads the AWS SDK configuration, so every binary resolves region,
//! credentials and endpoint the same way (`AWS_ENDPOINT_URL` points everything at
//! LocalStack; per-service `AWS_ENDPOINT_URL_<SERVICE>` variables work too).

use aws_config::{BehaviorVersion, SdkConfig};

/// The SDK configuration from the environment, profile and instance metadata, in the SDK's
/// standard order.
pub async fn load_config() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest()).load().await
}
