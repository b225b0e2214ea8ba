//! Lambda functions on LocalStack: deploy the packaged zips, invoke them.

use std::time::Duration;

use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::{Environment, FunctionCode, LastUpdateStatus, LogType, Runtime, State};
use base64::Engine;
use serde_json::Value;

/// The packaged zip of a Lambda binary (`functions/package.sh <bin>`, which `make test`
/// runs before the tests).
pub fn zip(bin: &str) -> Vec<u8> {
    let path = crate::target_dir()
        .join("lambda/debug")
        .join(format!("{bin}.zip"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; package it with `functions/package.sh worker probe` (`make test` does)",
            path.display()
        )
    })
}

/// What a function is created with.
#[derive(Debug, Clone)]
pub struct FunctionSpec {
    pub name: String,
    pub bin: String,
    pub timeout_seconds: i32,
    pub env: Vec<(String, String)>,
}

impl FunctionSpec {
    pub fn new(name: &str, bin: &str) -> Self {
        FunctionSpec {
            name: name.into(),
            bin: bin.into(),
            timeout_seconds: 10,
            env: Vec::new(),
        }
    }
}

/// Creates the function from its packaged zip and waits until it is Active; returns its ARN.
pub async fn create_function(
    client: &aws_sdk_lambda::Client,
    spec: &FunctionSpec,
) -> anyhow::Result<String> {
    create_function_from(client, spec, zip(&spec.bin)).await
}

/// Creates the function from the given zip and waits until it is Active; returns its ARN.
pub async fn create_function_from(
    client: &aws_sdk_lambda::Client,
    spec: &FunctionSpec,
    zip: Vec<u8>,
) -> anyhow::Result<String> {
    let mut env = Environment::builder();
    for (k, v) in &spec.env {
        env = env.variables(k, v);
    }
    let out = client
        .create_function()
        .function_name(&spec.name)
        .runtime(Runtime::Providedal2023)
        .handler("bootstrap")
        .role("arn:aws:iam::000000000000:role/lambda-role")
        .timeout(spec.timeout_seconds)
        .environment(env.build())
        .code(FunctionCode::builder().zip_file(Blob::new(zip)).build())
        .send()
        .await?;
    let arn = out.function_arn.unwrap_or_default();
    wait_active(client, &spec.name).await?;
    Ok(arn)
}

/// Waits until the function's state is Active (fails on Failed, with the reason).
pub async fn wait_active(client: &aws_sdk_lambda::Client, name: &str) -> anyhow::Result<()> {
    for _ in 0..300 {
        let conf = client
            .get_function_configuration()
            .function_name(name)
            .send()
            .await?;
        match conf.state {
            Some(State::Active) => return Ok(()),
            Some(State::Failed) => anyhow::bail!("function {name} failed: {:?}", conf.state_reason),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    anyhow::bail!("function {name} did not become Active")
}

/// Waits until a configuration update of `name` has been applied.
pub async fn wait_updated(client: &aws_sdk_lambda::Client, name: &str) -> anyhow::Result<()> {
    for _ in 0..300 {
        let conf = client
            .get_function_configuration()
            .function_name(name)
            .send()
            .await?;
        match conf.last_update_status {
            Some(LastUpdateStatus::Successful) | None => return Ok(()),
            Some(LastUpdateStatus::Failed) => {
                anyhow::bail!(
                    "updating {name} failed: {:?}",
                    conf.last_update_status_reason
                )
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    anyhow::bail!("the update of {name} did not finish")
}

/// One synchronous invocation's result.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub function_error: Option<String>,
    pub payload: Value,
    /// The tail of the invocation's log (START ... REPORT).
    pub log: String,
}

/// Invokes synchronously with `LogType=Tail`.
pub async fn invoke(
    client: &aws_sdk_lambda::Client,
    name: &str,
    payload: &Value,
) -> anyhow::Result<Invocation> {
    let out = client
        .invoke()
        .function_name(name)
        .log_type(LogType::Tail)
        .payload(Blob::new(payload.to_string()))
        .send()
        .await?;
    let bytes = out.payload.map(|b| b.into_inner()).unwrap_or_default();
    let log = out
        .log_result
        .and_then(|l| base64::engine::general_purpose::STANDARD.decode(l).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    Ok(Invocation {
        function_error: out.function_error,
        payload: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        log,
    })
}
