//! How any `async fn` of extractors becomes a job the worker can run.
//!
//! [`Handler`] is implemented for every function of up to six [`FromRun`] arguments whose
//! future returns `Result<T, E>` with `T: Serialize` (kept on the record) and `E` anything
//! that converts into a [`JobError`] (every `std::error::Error`, so `?` works). The worker
//! only sees the erased [`Job`]: the handler with its state, behind one `Arc`.
//!
//! Written by hand because no crate does it for a job: axum's `Handler` is the model, but
//! it is tied to HTTP requests and responses.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

use serde::Serialize;
use serde_json::Value;

use super::context::Ctx;
use super::error::JobError;
use super::extract::FromRun;

/// A boxed, sendable future: what an erased job returns.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What the worker keeps of a job's return: its result as JSON, or why it failed.
pub type JobResult = Result<Value, JobError>;

/// What a job may return: `Result<T, E>` with a serialisable `T` and an `E` that converts
/// into a [`JobError`].
pub trait IntoJobResult {
    /// The result as the record keeps it. A value that does not serialise is a permanent
    /// error (the job would return it again on every attempt).
    fn into_job_result(self) -> JobResult;
}

impl<T, E> IntoJobResult for Result<T, E>
where
    T: Serialize,
    E: Into<JobError>,
{
    fn into_job_result(self) -> JobResult {
        let value = self.map_err(Into::into)?;
        serde_json::to_value(value).map_err(|e| {
            JobError::permanent(format!("the job's result does not serialise as JSON: {e}"))
        })
    }
}

/// A job: a function of extractors (`T` is the tuple of their types, `S` the worker's
/// state). Implemented for every `async fn` that fits; never implemented by hand.
pub trait Handler<T, S>: Send + Sync + 'static {
    /// Makes the arguments from the run and the state, then runs the function.
    fn call(&self, ctx: Ctx, state: &S) -> BoxFuture<JobResult>;
}

macro_rules! impl_handler {
    ($($arg:ident),*) => {
        #[allow(non_snake_case, unused_variables)]
        impl<F, Fut, R, S, $($arg,)*> Handler<($($arg,)*), S> for F
        where
            F: Fn($($arg),*) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = R> + Send + 'static,
            R: IntoJobResult,
            $($arg: FromRun<S>,)*
        {
            fn call(&self, ctx: Ctx, state: &S) -> BoxFuture<JobResult> {
                $(
                    let $arg = match $arg::from_run(&ctx, state) {
                        Ok(value) => value,
                        Err(e) => return Box::pin(std::future::ready(Err(e))),
                    };
                )*
                let future = self($($arg),*);
                Box::pin(async move { future.await.into_job_result() })
            }
        }
    };
}

impl_handler!();
impl_handler!(T1);
impl_handler!(T1, T2);
impl_handler!(T1, T2, T3);
impl_handler!(T1, T2, T3, T4);
impl_handler!(T1, T2, T3, T4, T5);
impl_handler!(T1, T2, T3, T4, T5, T6);

/// A job as the worker runs it: called once per claimed attempt.
pub trait Job: Send + Sync + 'static {
    /// One attempt; a panic or overrunning the policy's timeout counts as a retryable failure.
    fn run(&self, ctx: Ctx) -> BoxFuture<JobResult>;
}

/// A handler with the state its extractors take from.
pub(crate) struct Bound<H, T, S> {
    pub(crate) handler: H,
    pub(crate) state: S,
    pub(crate) args: PhantomData<fn() -> T>,
}

impl<H, T, S> Job for Bound<H, T, S>
where
    H: Handler<T, S>,
    S: Send + Sync + 'static,
    T: 'static,
{
    fn run(&self, ctx: Ctx) -> BoxFuture<JobResult> {
        self.handler.call(ctx, &self.state)
    }
}
