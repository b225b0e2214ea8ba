//! A worker of your own: two jobs, run with the policies of `catalog.toml`.
//!
//! `schedkit::worker::main` does the rest: Lambda mode when the Runtime API is present,
//! long-polling anywhere else, settings from flags and `SCHEDKIT_*` variables, JSON logs
//! and EMF metrics, SIGTERM; it refuses to start when the catalog names a queue job that
//! is not registered here.

use std::process::ExitCode;

use aws_sdk_dynamodb::types::{AttributeValue, Put};
use schedkit::worker::{self, EmbeddedCatalog, Jobs};
use schedkit::{JobContext, JobError, JobResult};
use serde_json::json;

const CATALOG: EmbeddedCatalog =
    EmbeddedCatalog::new("catalog.toml", include_str!("../catalog.toml"));

fn main() -> ExitCode {
    worker::main(CATALOG, |setup| {
        let signups = Signups {
            table: setup.settings.effects_table.clone(),
        };
        Jobs::new()
            .add("greet", greet)
            .add("record-signup", move |ctx| {
                let signups = signups.clone();
                async move { signups.record(ctx) }
            })
    })
}

/// `greet`: no side effect; what it returns is kept on the execution record.
async fn greet(ctx: JobContext) -> JobResult {
    let name = ctx
        .payload
        .get("name")
        .and_then(|v| v.as_str())
        .unwrap_or("world");
    Ok(json!({ "greeting": format!("Hello, {name}!") }))
}

/// Where `record-signup` writes: the stage's effects table (`SCHEDKIT_EFFECTS_TABLE`).
#[derive(Clone)]
struct Signups {
    table: Option<String>,
}

impl Signups {
    /// `record-signup`: one item per execution key, handed to the framework as an effect
    /// instead of written here. schedkit commits it in one transaction with the run's DONE
    /// record, so it is applied exactly once, whatever crashes or duplicates come.
    fn record(&self, ctx: JobContext) -> JobResult {
        let table = self.table.as_deref().ok_or_else(|| {
            JobError::permanent("no effects table configured (SCHEDKIT_EFFECTS_TABLE)")
        })?;
        let field = |name: &str| {
            ctx.payload
                .get(name)
                .and_then(|v| v.as_str())
                .ok_or_else(|| {
                    JobError::permanent(format!("payload field `{name}` must be a string"))
                })
        };
        let (email, plan) = (field("email")?, field("plan")?);
        let put = Put::builder()
            .table_name(table)
            .item("effect_key", AttributeValue::S(ctx.key.clone()))
            .item("email", AttributeValue::S(email.into()))
            .item("plan", AttributeValue::S(plan.into()))
            .item(
                "recorded_at",
                AttributeValue::S(chrono::Utc::now().to_rfc3339()),
            )
            .build()
            .map_err(|e| JobError::permanent(format!("the signup item: {e}")))?;
        ctx.effects().put(put);
        Ok(json!({ "recorded": email }))
    }
}
