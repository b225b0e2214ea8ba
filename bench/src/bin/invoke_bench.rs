//! Round trip of a no-op Invoke, warm and cold, through LocalStack with schedkit's executor,
//! side by side with the same function driven directly through the Rust init's Runtime API
//! (no LocalStack in between): the difference is what LocalStack's Lambda service adds.
//!
//! `cargo run --bin invoke-bench -- [--warm 50] [--cold 10]` with LocalStack running.

use std::time::{Duration, Instant};

use clap::Parser;
use schedkit_lambda_init::{Environment, FunctionConfig, Invoke};
use schedkit_testkit::lambda::{FunctionSpec, create_function, invoke};
use schedkit_testkit::{localstack, unique};
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// Warm invocations measured (after one unmeasured warm-up).
    #[arg(long, default_value_t = 50)]
    warm: usize,
    /// Cold invocations measured (each the first invoke of a new function or environment).
    #[arg(long, default_value_t = 10)]
    cold: usize,
}

fn stats(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: f64| ms(samples[((samples.len() - 1) as f64 * q).round() as usize]);
    (at(0.5), at(0.9), ms(*samples.last().unwrap()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let payload = json!({"echo": 1});

    // Through LocalStack: Invoke API → Lambda service → executor plugin → init → bootstrap.
    let sdk = localstack().await;
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let mut cold_ls = Vec::new();
    let mut name = String::new();
    for _ in 0..args.cold {
        name = unique("bench");
        create_function(&lambda, &FunctionSpec::new(&name, "probe")).await?;
        let t = Instant::now();
        invoke(&lambda, &name, &payload).await?;
        cold_ls.push(t.elapsed());
    }
    let mut warm_ls = Vec::new();
    for _ in 0..args.warm {
        let t = Instant::now();
        invoke(&lambda, &name, &payload).await?;
        warm_ls.push(t.elapsed());
    }

    // Directly: the init's Runtime API and the same bootstrap, in this process.
    let probe = std::env::current_exe()?.with_file_name("probe");
    let config = FunctionConfig {
        task_root: probe.parent().unwrap().to_path_buf(),
        bootstrap: probe,
        env: vec![
            ("AWS_LAMBDA_FUNCTION_NAME".into(), "probe".into()),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE".into(), "128".into()),
            ("AWS_LAMBDA_FUNCTION_VERSION".into(), "$LATEST".into()),
        ],
        timeout: Duration::from_secs(10),
        memory_mb: 128,
        version: "$LATEST".into(),
    };
    let request = || Invoke {
        request_id: uuid::Uuid::new_v4().to_string(),
        payload: payload.to_string().into(),
        function_arn: "arn:aws:lambda:us-east-1:000000000000:function:probe".into(),
        trace_id: String::new(),
    };
    let mut cold_direct = Vec::new();
    let mut environment = None;
    for _ in 0..args.cold {
        let t = Instant::now();
        let mut env = Environment::start(config.clone()).await?;
        env.invoke(request()).await;
        cold_direct.push(t.elapsed());
        if let Some(mut old) = environment.replace(env) {
            old.shutdown().await;
        }
    }
    let mut env = environment.expect("at least one cold run");
    let mut warm_direct = Vec::new();
    for _ in 0..args.warm {
        let t = Instant::now();
        env.invoke(request()).await;
        warm_direct.push(t.elapsed());
    }
    env.shutdown().await;

    println!(
        "no-op Invoke round trip, milliseconds ({} warm, {} cold samples)",
        args.warm, args.cold
    );
    println!("| path | cold median | warm median | warm p90 | warm max |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (path, cold, warm) in [
        (
            "LocalStack Invoke API → schedkit executor",
            cold_ls,
            warm_ls,
        ),
        (
            "init Runtime API directly (peer baseline)",
            cold_direct,
            warm_direct,
        ),
    ] {
        let (cold_median, _, _) = stats(cold);
        let (median, p90, max) = stats(warm);
        println!("| {path} | {cold_median:.2} | {median:.2} | {p90:.2} | {max:.2} |");
    }
    Ok(())
}
