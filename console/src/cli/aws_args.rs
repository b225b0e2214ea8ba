//! AWS connection flags shared by every command. `AWS_ENDPOINT_URL` (or `--endpoint-url`)
//! points everything at LocalStack; the library builds the SDK configuration from them.

use clap::Args;
use schedkit::aws::{ConfigOverrides, SdkConfig};

#[derive(Debug, Clone, Args)]
pub struct AwsArgs {
    /// AWS profile (default: the SDK's usual resolution).
    #[arg(long, global = true, env = "AWS_PROFILE")]
    pub profile: Option<String>,
    /// AWS region.
    #[arg(long, global = true, env = "AWS_REGION")]
    pub region: Option<String>,
    /// Endpoint of every service, e.g. http://127.0.0.1:4566 for LocalStack.
    #[arg(long, global = true, env = "AWS_ENDPOINT_URL")]
    pub endpoint_url: Option<String>,
}

impl AwsArgs {
    pub async fn sdk_config(&self) -> SdkConfig {
        schedkit::aws::load_config_with(&ConfigOverrides {
            profile: self.profile.clone(),
            region: self.region.clone(),
            endpoint_url: self.endpoint_url.clone(),
        })
        .await
    }
}
