//! Parameters and secrets a job reads, as Powertools' parameters utility gives them: named
//! in the catalog (`secrets = { DB_URL = "ssm:/team/db-url" }`), fetched on first use,
//! kept for a while (`settings.secrets_max_age_seconds`) and fetched again after it, so a
//! rotated secret reaches the worker without a restart and a run costs no request.
//!
//! A source is `ssm:<parameter name or ARN>` (SecureString decrypted) or
//! `secretsmanager:<secret name or ARN>` (its current string). The template grants the
//! worker exactly the sources the catalog lists (`crate::iac`), and a job reads only its
//! own (`Ctx::secret`); a command job gets each in its environment under its name.

mod aws;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

pub use aws::AwsSource;

/// A fetch in flight.
pub type Fetching<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + 'a>>;

/// Where a secret's value comes from (the AWS APIs, or a test's map).
pub trait Source: Send + Sync + 'static {
    /// The current value of `source` (`ssm:/team/db-url`), or why there is none.
    fn fetch<'a>(&'a self, source: &'a str) -> Fetching<'a>;
}

/// The values fetched, each kept `max_age` from its fetch. Shared by every run of a worker.
pub struct SecretStore {
    source: Box<dyn Source>,
    max_age: Duration,
    cache: Mutex<HashMap<String, (String, Instant)>>,
}

impl SecretStore {
    /// Fetches from `source`, keeping each value `max_age`.
    pub fn new(source: impl Source, max_age: Duration) -> Self {
        SecretStore {
            source: Box::new(source),
            max_age,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// `source`'s value: the cached one while younger than the max age, else fetched
    /// (two runs asking at once may both fetch; both get the value).
    pub async fn get(&self, source: &str) -> Result<String, String> {
        let now = Instant::now();
        if let Some((value, at)) = self.cache.lock().expect("the cache's lock").get(source)
            && now.duration_since(*at) < self.max_age
        {
            return Ok(value.clone());
        }
        let value = self.source.fetch(source).await?;
        self.cache
            .lock()
            .expect("the cache's lock")
            .insert(source.to_string(), (value.clone(), now));
        Ok(value)
    }
}

/// A source, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind<'a> {
    /// An SSM parameter: its name (`/team/db-url`) or ARN.
    Parameter(&'a str),
    /// A Secrets Manager secret: its name (`prod/partner-api`) or ARN.
    Secret(&'a str),
}

/// `ssm:<name>` or `secretsmanager:<name>`, with a name of the characters both services
/// allow; the error says what is wrong.
pub fn parse(source: &str) -> Result<Kind<'_>, String> {
    let (kind, name) = if let Some(name) = source.strip_prefix("ssm:") {
        (Kind::Parameter(name), name)
    } else if let Some(name) = source.strip_prefix("secretsmanager:") {
        (Kind::Secret(name), name)
    } else {
        return Err(format!(
            "`{source}` must be `ssm:<parameter name>` or `secretsmanager:<secret name>`"
        ));
    };
    let allowed = |c: char| c.is_ascii_alphanumeric() || "/_.-+=@:".contains(c);
    if name.is_empty() || name.len() > 2048 || !name.chars().all(allowed) {
        return Err(format!(
            "`{source}`: the name must be 1-2048 letters, digits and `/_.-+=@:`"
        ));
    }
    Ok(kind)
}

/// The IAM resource that allows reading `source` (in the template's `!Sub`): the
/// parameter's ARN, or the secret's ARN with the six characters Secrets Manager appends.
pub fn resource(source: &str) -> Option<String> {
    let account = "arn:${AWS::Partition}:{service}:${AWS::Region}:${AWS::AccountId}";
    Some(match parse(source).ok()? {
        Kind::Parameter(arn) | Kind::Secret(arn) if arn.starts_with("arn:") => arn.to_string(),
        // `name:3` or `name:label` reads a version of the parameter; its ARN has neither
        // (a parameter's name holds no `:`).
        Kind::Parameter(name) => format!(
            "{}:parameter/{}",
            account.replace("{service}", "ssm"),
            name.split(':')
                .next()
                .unwrap_or(name)
                .trim_start_matches('/')
        ),
        Kind::Secret(name) => format!(
            "{}:secret:{name}-??????",
            account.replace("{service}", "secretsmanager")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(Arc<AtomicUsize>);

    impl Source for Counting {
        fn fetch<'a>(&'a self, source: &'a str) -> Fetching<'a> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move { Ok(format!("{source}#{n}")) })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_value_is_fetched_once_then_again_after_its_max_age() {
        let fetches = Arc::new(AtomicUsize::new(0));
        let store = SecretStore::new(Counting(fetches.clone()), Duration::from_secs(300));
        assert_eq!(store.get("ssm:/a").await.unwrap(), "ssm:/a#1");
        tokio::time::advance(Duration::from_secs(299)).await;
        assert_eq!(store.get("ssm:/a").await.unwrap(), "ssm:/a#1");
        assert_eq!(store.get("ssm:/b").await.unwrap(), "ssm:/b#2");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(store.get("ssm:/a").await.unwrap(), "ssm:/a#3", "refreshed");
        assert_eq!(fetches.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn sources_name_their_service_and_grant_exactly_themselves() {
        assert_eq!(
            parse("ssm:/team/db-url"),
            Ok(Kind::Parameter("/team/db-url"))
        );
        assert!(parse("vault:x").unwrap_err().contains("must be `ssm:"));
        assert!(parse("ssm:${x}").unwrap_err().contains("the name must be"));
        assert_eq!(
            resource("ssm:/team/db-url").unwrap(),
            "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/team/db-url"
        );
        assert_eq!(
            resource("secretsmanager:prod/partner").unwrap(),
            "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:prod/partner-??????"
        );
        let arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:x-AbCdEf";
        assert_eq!(resource(&format!("secretsmanager:{arn}")).unwrap(), arn);
        // A parameter's version or label selects what is read; IAM grants the parameter.
        assert_eq!(
            resource("ssm:/team/db-url:3").unwrap(),
            resource("ssm:/team/db-url").unwrap()
        );
        assert_eq!(
            resource("ssm:/team/db-url:current").unwrap(),
            resource("ssm:/team/db-url").unwrap()
        );
    }
}
