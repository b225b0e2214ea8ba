//! One place that loads the AWS SDK configuration, so every binary resolves region,
//! credentials and endpoint the same way (`AWS_ENDPOINT_URL` points everything at
//! LocalStack; per-service `AWS_ENDPOINT_URL_<SERVICE>` variables work too), and one way to
//! turn an SDK error into a line a person can act on.

use std::fmt::Display;

pub use aws_config::SdkConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_dynamodb::config::SharedHttpClient;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use aws_smithy_http_client::{Builder, ConnectorBuilder};

/// The SDK configuration from the environment, profile and instance metadata, in the SDK's
/// standard order.
pub async fn load_config() -> SdkConfig {
    load_config_with(&ConfigOverrides::default()).await
}

/// What a command line may set over the SDK's own resolution.
#[derive(Debug, Clone, Default)]
pub struct ConfigOverrides {
    /// A named profile of the shared config files.
    pub profile: Option<String>,
    /// A region name (`eu-west-1`); None leaves it to the SDK (`AWS_REGION`, the profile).
    pub region: Option<String>,
    /// One endpoint for every service (LocalStack).
    pub endpoint_url: Option<String>,
}

/// The SDK's configuration loader with schedkit's HTTPS client ([`https_client`]): start
/// here, not at `aws_config::defaults`, which without the SDK's default client (not
/// compiled in) loads a configuration that cannot send a request.
pub fn config_loader() -> aws_config::ConfigLoader {
    aws_config::defaults(BehaviorVersion::latest()).http_client(https_client())
}

/// The HTTPS client of every SDK client schedkit makes: the SDK's default client (hyper,
/// rustls, the connector settings and timeouts of each client's configuration, a proxy
/// from `HTTPS_PROXY`/`NO_PROXY` as the SDK's current behaviour version has it) with
/// rustls's *ring* provider in place of aws-lc.
///
/// Why by hand: the SDK's `default-https-client` feature has no choice of provider, and
/// aws-lc's build compiles a C library (34-39 s of CPU a build on the CI machine's two
/// cores, where every build of the dependency graph paid it); ring builds in a fraction.
pub fn https_client() -> SharedHttpClient {
    Builder::new().build_with_connector_fn(|settings, components| {
        let mut connector =
            ConnectorBuilder::default().tls_provider(tls::Provider::Rustls(CryptoMode::Ring));
        connector.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            connector.set_sleep_impl(components.sleep_impl());
        }
        connector.set_proxy_config(Some(ProxyConfig::from_env()));
        connector.build()
    })
}

/// The SDK configuration with the given overrides; everything not overridden is resolved
/// as [`load_config`] does.
pub async fn load_config_with(overrides: &ConfigOverrides) -> SdkConfig {
    let mut loader = config_loader();
    if let Some(p) = &overrides.profile {
        loader = loader.profile_name(p);
    }
    if let Some(r) = &overrides.region {
        loader = loader.region(Region::new(r.clone()));
    }
    if let Some(e) = &overrides.endpoint_url {
        loader = loader.endpoint_url(e);
    }
    loader.load().await
}

/// A call to AWS that failed: what schedkit was doing, and the service's answer on one
/// line (`reading queue X: AWS.SimpleQueueService.NonExistentQueue: The specified queue
/// does not exist.`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{doing}: {answer}")]
pub struct AwsError {
    /// What was being done.
    pub doing: String,
    /// The service's code and message, or the cause chain when no answer came ([`describe`]).
    pub answer: String,
    /// The service's error code, when it answered; callers match on it.
    pub code: Option<String>,
}

impl AwsError {
    /// The error of one SDK call, with `doing` in front.
    pub fn of<E, R>(doing: impl Display, err: &SdkError<E, R>) -> AwsError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug + 'static,
    {
        AwsError {
            doing: doing.to_string(),
            answer: describe(err),
            code: err
                .as_service_error()
                .and_then(|s| s.code())
                .map(str::to_owned),
        }
    }
}

/// Turns SDK results into [`AwsError`]s that say what was being done.
pub trait AwsResultExt<T> {
    /// The error, if any, as an [`AwsError`] with `doing` in front.
    fn aws(self, doing: impl Display) -> Result<T, AwsError>;
}

impl<T, E, R> AwsResultExt<T> for Result<T, SdkError<E, R>>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    fn aws(self, doing: impl Display) -> Result<T, AwsError> {
        self.map_err(|e| AwsError::of(doing, &e))
    }
}

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
        let wrapped = Err::<(), _>(err).aws("reading queue q").unwrap_err();
        assert_eq!(
            wrapped.to_string(),
            "reading queue q: dispatch failure: io error: Connection refused"
        );
        assert_eq!(wrapped.code, None);
    }

    /// LocalStack speaks plain HTTP, so no other test reaches TLS: this one has a client
    /// from [`config_loader`] call an `https://` endpoint on a local socket and reads what
    /// it sends, a TLS ClientHello (record type 22, version 3.x, handshake type 1). A
    /// client without a usable crypto provider fails before it sends anything.
    #[tokio::test]
    async fn the_https_client_opens_tls_with_ring() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let first_bytes = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut header = [0u8; 6];
            socket.read_exact(&mut header).await.unwrap();
            header
        });
        let sdk = config_loader()
            .endpoint_url(format!("https://127.0.0.1:{port}"))
            .region(Region::new("us-east-1"))
            .credentials_provider(aws_sdk_sqs::config::Credentials::new(
                "test", "test", None, None, "test",
            ))
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .operation_timeout(std::time::Duration::from_secs(2))
                    .build(),
            )
            .load()
            .await;
        let sent = aws_sdk_sqs::Client::new(&sdk).list_queues().send().await;
        assert!(sent.is_err(), "the socket never answers");
        let header = first_bytes.await.unwrap();
        assert_eq!((header[0], header[1], header[5]), (22, 3, 1), "{header:?}");
    }
}
