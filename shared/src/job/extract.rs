//! Extractors: what a job's arguments are made from, before the job runs.
//!
//! A job is an `async fn` whose arguments each implement [`FromRun`]: the run's context
//! ([`Ctx`]), its payload as the job's own type ([`Payload`]), and state built once for
//! every run ([`State`]). An argument that cannot be made fails the run before the job is
//! called: a payload that does not fit its type is a permanent error naming the field.

use serde::de::DeserializeOwned;

use super::context::Ctx;
use super::error::JobError;

/// Something a job's argument can be made from: the run and the worker's state `S`.
pub trait FromRun<S>: Sized {
    /// The argument, or why the run cannot go on (the job is then not called).
    fn from_run(ctx: &Ctx, state: &S) -> Result<Self, JobError>;
}

/// The whole run context: key, schedule time, attempt, effects, lease, chain.
impl<S> FromRun<S> for Ctx {
    fn from_run(ctx: &Ctx, _: &S) -> Result<Self, JobError> {
        Ok(ctx.clone())
    }
}

/// The envelope's payload deserialised as `T`. A payload that does not fit is a permanent
/// error naming the path of the bad field and what was wrong with it, never its value
/// (``payload field `lines[2].amount`: invalid type: string, expected i64``): the same
/// message will fail the same way every time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload<T>(pub T);

impl<S, T: DeserializeOwned> FromRun<S> for Payload<T> {
    fn from_run(ctx: &Ctx, _: &S) -> Result<Self, JobError> {
        serde_path_to_error::deserialize(&ctx.payload)
            .map(Payload)
            .map_err(|e| {
                let path = e.path().to_string();
                let inner = without_values(&e.into_inner().to_string());
                if path == "." {
                    JobError::permanent(format!("payload: {inner}"))
                } else {
                    JobError::permanent(format!("payload field `{path}`: {inner}"))
                }
            })
    }
}

/// serde's message without the value it met (`invalid type: string "4111...", expected
/// i64` → `invalid type: string, expected i64`): the error goes to the record, the log line
/// and the dead letter, where payload values never go unless asked
/// (`SCHEDKIT_LOG_PAYLOADS`). Written by hand: serde formats the value into its message.
fn without_values(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: ", "unknown variant "] {
        let Some(rest) = message.strip_prefix(prefix) else {
            continue;
        };
        let Some(end) = rest.rfind(", expected") else {
            return format!("{}(value withheld)", prefix);
        };
        // The kind serde names before the value (`integer`, `floating point`, `string`).
        let kind = rest[..end]
            .split(['`', '"'])
            .next()
            .unwrap_or_default()
            .trim_end();
        return format!("{prefix}{kind}{}", &rest[end..]).replace("variant , ", "variant, ");
    }
    message.to_string()
}

/// State built once at start-up and lent to every run (clients, table names): the worker's
/// state `S` itself, or any part of it that implements [`FromRef`].
#[derive(Debug, Clone, Copy, Default)]
pub struct State<T>(pub T);

/// A part of the worker's state a job can take as `State<Self>`: clone it out of `S`.
/// Every `Clone` type is a part of itself; implement it for the fields of a larger state.
pub trait FromRef<S> {
    /// This part of `state`.
    fn from_ref(state: &S) -> Self;
}

impl<T: Clone> FromRef<T> for T {
    fn from_ref(state: &T) -> Self {
        state.clone()
    }
}

impl<S, T: FromRef<S>> FromRun<S> for State<T> {
    fn from_run(_: &Ctx, state: &S) -> Result<Self, JobError> {
        Ok(State(T::from_ref(state)))
    }
}

#[cfg(test)]
mod tests {
    use super::without_values;

    #[test]
    fn serdes_messages_keep_the_kind_and_lose_the_value() {
        let cases = [
            (
                "invalid type: integer `4111111111111111`, expected a string",
                "invalid type: integer, expected a string",
            ),
            (
                "invalid type: string \"secret \\\"quoted\\\" value\", expected i64",
                "invalid type: string, expected i64",
            ),
            (
                "invalid value: floating point `1.5`, expected u8",
                "invalid value: floating point, expected u8",
            ),
            (
                "unknown variant `ada@example.com`, expected `a` or `b`",
                "unknown variant, expected `a` or `b`",
            ),
            ("missing field `email`", "missing field `email`"),
            (
                "unknown field `x`, expected `y`",
                "unknown field `x`, expected `y`",
            ),
        ];
        for (serde, shown) in cases {
            assert_eq!(without_values(serde), shown, "{serde}");
        }
    }
}
