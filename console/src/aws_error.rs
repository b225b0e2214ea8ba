//! SDK errors as one line, with what was being done: `reading the queue X: QueueDoesNotExist:
//! The specified queue does not exist.`

use std::fmt::Display;

use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};

pub trait AwsResultExt<T> {
    /// Like `anyhow::Context::context`, but with the service's code and message only.
    fn aws(self, what: impl Display) -> anyhow::Result<T>;
}

impl<T, E, R> AwsResultExt<T> for Result<T, SdkError<E, R>>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    fn aws(self, what: impl Display) -> anyhow::Result<T> {
        self.map_err(|e| anyhow::anyhow!("{what}: {}", schedkit::aws::describe(&e)))
    }
}
