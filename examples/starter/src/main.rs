//! A worker of your own: two jobs, run with the policies of `catalog.toml`. Lambda or
//! long-polling, settings, logs, metrics and signals are `schedkit::worker::main`'s.

use aws_sdk_dynamodb::types::{AttributeValue::S, Put};
use schedkit::worker::{self, EmbeddedCatalog};
use schedkit::{Ctx, JobError, Jobs, Payload, State, permanent};
use serde::Deserialize;
use serde_json::{Value, json};

const CATALOG: EmbeddedCatalog =
    EmbeddedCatalog::new("catalog.toml", include_str!("../catalog.toml"));

fn main() -> std::process::ExitCode {
    worker::main(CATALOG, |setup| jobs(setup.settings.effects_table.clone()))
}

/// The jobs by catalog name; `State` arguments are cloned from the state given here: the
/// stage's table for the jobs' own writes (`SCHEDKIT_EFFECTS_TABLE`).
fn jobs(effects_table: Option<String>) -> Jobs<Option<String>> {
    let jobs = Jobs::with_state(effects_table).add("greet", greet);
    jobs.add("record-signup", record_signup)
}

#[derive(Deserialize)]
struct Greeting {
    name: Option<String>,
}

/// `greet`: no side effect; what it returns is kept on the execution record.
async fn greet(Payload(g): Payload<Greeting>) -> Result<Value, JobError> {
    let name = g.name.as_deref().unwrap_or("world");
    Ok(json!({ "greeting": format!("Hello, {name}!") }))
}

#[derive(Deserialize)]
struct Signup {
    email: String,
    plan: String,
}

/// `record-signup`: its write is handed to schedkit as an effect, committed in one
/// transaction with the run's DONE record: applied once, whatever crashes.
async fn record_signup(
    ctx: Ctx,
    State(table): State<Option<String>>,
    Payload(s): Payload<Signup>,
) -> Result<Value, JobError> {
    let table = table.ok_or_else(|| permanent("no effects table (SCHEDKIT_EFFECTS_TABLE)"))?;
    let now = S(chrono::Utc::now().to_rfc3339());
    let put = Put::builder()
        .table_name(table)
        .item("effect_key", S(ctx.key.clone()));
    let put = put
        .item("email", S(s.email.clone()))
        .item("plan", S(s.plan));
    ctx.effects()
        .put(put.item("recorded_at", now).build().map_err(permanent)?);
    Ok(json!({ "recorded": s.email }))
}

#[cfg(test)]
mod tests;
