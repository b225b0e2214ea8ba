//! A job's secrets from LocalStack's SSM Parameter Store and Secrets Manager, through the
//! worker's store: read once, kept for the max age, read again after it (a rotation
//! reaches the worker without a restart).

use std::time::Duration;

use schedkit::secrets::{AwsSource, SecretStore};
use schedkit_testkit::{localstack, unique};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_and_secrets_are_read_cached_and_read_again_after_their_max_age() {
    let sdk = localstack().await;
    let ssm = aws_sdk_ssm::Client::new(&sdk);
    let sm = aws_sdk_secretsmanager::Client::new(&sdk);
    let (parameter, secret) = (format!("/{}/db-url", unique("team")), unique("partner"));
    ssm.put_parameter()
        .name(&parameter)
        .value("postgres://one")
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .send()
        .await
        .unwrap();
    sm.create_secret()
        .name(&secret)
        .secret_string("key-one")
        .send()
        .await
        .unwrap();
    let store = SecretStore::new(AwsSource::new(&sdk), Duration::from_secs(2));
    let (p, s) = (
        format!("ssm:{parameter}"),
        format!("secretsmanager:{secret}"),
    );
    assert_eq!(store.get(&p).await.unwrap(), "postgres://one");
    assert_eq!(store.get(&s).await.unwrap(), "key-one");
    // Rotated: the worker keeps what it read until the max age, then reads the new value.
    ssm.put_parameter()
        .name(&parameter)
        .value("postgres://two")
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .overwrite(true)
        .send()
        .await
        .unwrap();
    sm.put_secret_value()
        .secret_id(&secret)
        .secret_string("key-two")
        .send()
        .await
        .unwrap();
    assert_eq!(store.get(&p).await.unwrap(), "postgres://one");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(store.get(&p).await.unwrap(), "postgres://two");
    assert_eq!(store.get(&s).await.unwrap(), "key-two");
    let missing = store.get("ssm:/no/such/parameter").await.unwrap_err();
    assert!(missing.contains("ParameterNotFound"), "{missing}");
}
