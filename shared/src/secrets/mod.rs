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
use std::sync::{Arc, Mutex};
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

/// The longest a value is still given after its max age while fetching it again fails
/// (throttling, an outage of the parameter store): the run gets the value it would have
/// had a moment ago rather than a failure.
pub const STALE_AT_MOST: Duration = Duration::from_secs(24 * 3600);

/// How long a value whose fetch failed is given before a fetch is tried again (at most
/// the max age): runs meanwhile do not ask a store that just refused.
pub const RETRY_FAILED_FETCH: Duration = Duration::from_secs(30);

/// The values fetched, each kept `max_age` from its fetch. Shared by every run of a worker.
pub struct SecretStore {
    source: Box<dyn Source>,
    max_age: Duration,
    cache: Mutex<HashMap<String, (String, Instant)>>,
    /// Until when a value whose fetch failed is given without asking again.
    failed: Mutex<HashMap<String, Instant>>,
    /// One fetch of a source at a time: runs that find it expired together wait for the
    /// one fetch instead of each asking (a herd the parameter store would throttle).
    fetching: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl SecretStore {
    /// Fetches from `source`, keeping each value `max_age`.
    pub fn new(source: impl Source, max_age: Duration) -> Self {
        SecretStore {
            source: Box::new(source),
            max_age,
            cache: Mutex::new(HashMap::new()),
            failed: Mutex::new(HashMap::new()),
            fetching: Mutex::new(HashMap::new()),
        }
    }

    /// `source`'s value: the cached one while younger than the max age, else fetched once
    /// for every run that asks meanwhile. A failed fetch gives the value fetched before, up
    /// to [`STALE_AT_MOST`] old (with a warning); with none, the failure.
    pub async fn get(&self, source: &str) -> Result<String, String> {
        if let Some(value) = self.fresh(source) {
            return Ok(value);
        }
        let flight = self
            .fetching
            .lock()
            .expect("the fetches' lock")
            .entry(source.to_string())
            .or_default()
            .clone();
        let _only = flight.lock().await;
        // Fetched by the run that held the flight before this one.
        if let Some(value) = self.fresh(source) {
            return Ok(value);
        }
        match self.source.fetch(source).await {
            Ok(value) => {
                self.cache
                    .lock()
                    .expect("the cache's lock")
                    .insert(source.to_string(), (value.clone(), Instant::now()));
                Ok(value)
            }
            Err(e) => {
                let cache = self.cache.lock().expect("the cache's lock");
                match cache.get(source) {
                    Some((value, at)) if at.elapsed() < self.max_age + STALE_AT_MOST => {
                        let again = Instant::now() + RETRY_FAILED_FETCH.min(self.max_age);
                        self.failed
                            .lock()
                            .expect("the failures' lock")
                            .insert(source.to_string(), again);
                        tracing::warn!(source, error = %e, age_seconds = at.elapsed().as_secs(), "fetching a secret again failed: the value fetched before is given");
                        Ok(value.clone())
                    }
                    _ => Err(e),
                }
            }
        }
    }

    /// The cached value while younger than the max age, or while its failed fetch is not
    /// to be tried again yet.
    fn fresh(&self, source: &str) -> Option<String> {
        let cache = self.cache.lock().expect("the cache's lock");
        let (value, at) = cache.get(source)?;
        let waiting = self
            .failed
            .lock()
            .expect("the failures' lock")
            .get(source)
            .is_some_and(|until| Instant::now() < *until);
        (at.elapsed() < self.max_age || waiting).then(|| value.clone())
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
        // A parameter's ARN read at a version or label (`…:parameter/db:3`) is granted
        // without it, as a name is.
        Kind::Parameter(arn) if arn.starts_with("arn:") => match arn.split_once(":parameter/") {
            Some((base, name)) => format!(
                "{base}:parameter/{}",
                name.split(':').next().unwrap_or(name)
            ),
            None => arn.to_string(),
        },
        Kind::Secret(arn) if arn.starts_with("arn:") => arn.to_string(),
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
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(Arc<AtomicUsize>);

    impl Source for Counting {
        fn fetch<'a>(&'a self, source: &'a str) -> Fetching<'a> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move { Ok(format!("{source}#{n}")) })
        }
    }

    /// Fetches after the first fail, slowly: the first value, then an outage.
    struct Flaky(Arc<AtomicUsize>);

    impl Source for Flaky {
        fn fetch<'a>(&'a self, source: &'a str) -> Fetching<'a> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if n == 1 {
                    Ok(format!("{source}#1"))
                } else {
                    Err("throttled".to_string())
                }
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_value_is_fetched_once_for_every_run_and_kept_when_the_fetch_fails() {
        let fetches = Arc::new(AtomicUsize::new(0));
        let store = Arc::new(SecretStore::new(
            Flaky(fetches.clone()),
            Duration::from_secs(300),
        ));
        assert_eq!(store.get("ssm:/a").await.unwrap(), "ssm:/a#1");
        tokio::time::advance(Duration::from_secs(301)).await;
        // Ten runs at once after the max age: one fetch, which fails; each run still gets
        // the value it had (a rotation keeps the previous version valid for a while).
        let runs: Vec<_> = (0..10)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store.get("ssm:/a").await })
            })
            .collect();
        for run in runs {
            assert_eq!(run.await.unwrap().unwrap(), "ssm:/a#1");
        }
        assert_eq!(fetches.load(Ordering::SeqCst), 2, "one fetch for the ten");
        // Past the longest a value is kept over failed fetches, the failure is the run's.
        tokio::time::advance(STALE_AT_MOST).await;
        assert_eq!(store.get("ssm:/a").await.unwrap_err(), "throttled");
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
        let arn = "arn:aws:ssm:eu-west-1:123456789012:parameter/team/db-url";
        assert_eq!(resource(&format!("ssm:{arn}:3")).unwrap(), arn);
        assert_eq!(resource(&format!("ssm:{arn}")).unwrap(), arn);
    }
}
