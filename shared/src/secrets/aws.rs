//! Secrets from AWS: SSM Parameter Store (`GetParameter`, decrypted) and Secrets Manager
//! (`GetSecretValue`, its current string).

use super::{Fetching, Kind, Source, parse};

/// The two services' clients, made once for the worker.
pub struct AwsSource {
    ssm: aws_sdk_ssm::Client,
    secrets: aws_sdk_secretsmanager::Client,
}

impl AwsSource {
    /// Clients on the worker's configuration.
    pub fn new(sdk: &crate::aws::SdkConfig) -> Self {
        AwsSource {
            ssm: aws_sdk_ssm::Client::new(sdk),
            secrets: aws_sdk_secretsmanager::Client::new(sdk),
        }
    }
}

impl Source for AwsSource {
    fn fetch<'a>(&'a self, source: &'a str) -> Fetching<'a> {
        Box::pin(async move {
            match parse(source)? {
                Kind::Parameter(name) => {
                    let out = self
                        .ssm
                        .get_parameter()
                        .name(name)
                        .with_decryption(true)
                        .send()
                        .await
                        .map_err(|e| crate::aws::describe(&e))?;
                    out.parameter
                        .and_then(|p| p.value)
                        .ok_or_else(|| format!("parameter {name} has no value"))
                }
                Kind::Secret(id) => {
                    let out = self
                        .secrets
                        .get_secret_value()
                        .secret_id(id)
                        .send()
                        .await
                        .map_err(|e| crate::aws::describe(&e))?;
                    out.secret_string
                        .ok_or_else(|| format!("secret {id} has no string value (a binary one?)"))
                }
            }
        })
    }
}
