//! AWS connection flags shared by every command, and the SDK configuration built from them
//! in one place. `AWS_ENDPOINT_URL` (or `--endpoint-url`) points everything at LocalStack.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use clap::Args;

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
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(p) = &self.profile {
            loader = loader.profile_name(p);
        }
        if let Some(r) = &self.region {
            loader = loader.region(Region::new(r.clone()));
        }
        if let Some(e) = &self.endpoint_url {
            loader = loader.endpoint_url(e);
        }
        loader.load().await
    }
}
