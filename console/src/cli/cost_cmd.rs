//! `schedkit cost`: a month of the catalog at AWS's list prices.

use clap::Args;
use schedkit::cost::{self, Assumptions, Stack};
use schedkit::iac;

use super::globals::{Globals, load_catalog};
use super::output::{Output, table};
use super::usage::UsageError;

#[derive(Debug, Args)]
pub struct CostArgs {
    /// The month's length in days.
    #[arg(long, default_value_t = 30)]
    pub days: u32,
    /// From this time (RFC 3339; default now): when the schedules are counted from.
    #[arg(long, value_parser = super::globals::parse_instant)]
    pub from: Option<chrono::DateTime<chrono::Utc>>,
    /// A run's own work in seconds, on average (Lambda's billed time, heartbeats).
    #[arg(long, default_value_t = 1.0)]
    pub run_seconds: f64,
    /// The worker function's memory in MB (the template's `MemorySize`).
    #[arg(long, default_value_t = 128.0)]
    pub memory_mb: f64,
    /// Polling workers serving host jobs (`runs_on = "host"`).
    #[arg(long, default_value_t = 1)]
    pub host_pollers: u32,
    /// Availability Zones of the VPC interface endpoints (`CreateVpcEndpoints`); 0: none.
    #[arg(long, default_value_t = 0)]
    pub endpoint_azs: u32,
}

/// schedkit's template, to count what the catalog's stack bills by the month.
const STOCK_TEMPLATE: &str = include_str!("../../../infra/template.yaml");

pub fn run(a: &CostArgs, cli: &Globals) -> anyhow::Result<()> {
    if !(a.run_seconds >= 0.0 && a.memory_mb >= 128.0 && a.days > 0) {
        return Err(UsageError(
            "--run-seconds must be 0 or more, --memory-mb at least 128 (Lambda's least), --days at least 1".into(),
        )
        .into());
    }
    let catalog = load_catalog(cli)?;
    let rendered = iac::render(&catalog).map_err(|e| UsageError(e.to_string()))?;
    let template = iac::apply(STOCK_TEMPLATE, &rendered).map_err(|e| UsageError(e.to_string()))?;
    let stack = Stack {
        alarms: template.matches("Type: AWS::CloudWatch::Alarm").count(),
        dashboards: template.matches("Type: AWS::CloudWatch::Dashboard").count(),
    };
    let assumptions = Assumptions {
        days: a.days,
        from: a.from.unwrap_or_else(chrono::Utc::now),
        run_seconds: a.run_seconds,
        memory_mb: a.memory_mb,
        host_pollers: a.host_pollers,
        endpoint_azs: a.endpoint_azs,
    };
    let estimate = cost::month(&catalog, stack, &assumptions, &cost::PRICES);
    if cli.output == Output::Json {
        let mut value = serde_json::to_value(&estimate)?;
        value["total_usd"] = estimate.total().into();
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    let mut rows: Vec<Vec<String>> = estimate
        .lines
        .iter()
        .map(|l| {
            vec![
                l.item.clone(),
                format!("{} {}", amount(l.quantity), l.unit),
                format!("${}", price(l.unit_price)),
                format!("{:.2}", l.usd),
            ]
        })
        .collect();
    rows.push(vec![
        "total".into(),
        String::new(),
        String::new(),
        format!("{:.2}", estimate.total()),
    ]);
    println!(
        "{}: {} jobs, {} chains; {} firings and {} runs in {} days ({} chain runs)",
        catalog.file,
        catalog.jobs.len(),
        catalog.chains.len(),
        amount(estimate.firings),
        amount(estimate.runs),
        estimate.days,
        amount(estimate.chain_runs),
    );
    print!(
        "{}",
        table(&["ITEM", "A MONTH", "UNIT PRICE", "USD"], &rows)
    );
    println!(
        "Prices: {}. Assumed: {} s of a run's own work, {} MB, one-off runs and retries not counted; a host's own cost (a container, a VM) not included.",
        estimate.prices_as_of, a.run_seconds, a.memory_mb
    );
    Ok(())
}

/// A quantity with its thousands grouped, to one decimal below ten.
fn amount(x: f64) -> String {
    if x > 0.0 && x < 0.001 {
        return "<0.001".into();
    }
    if x < 10.0 && x.fract() != 0.0 {
        return format!("{x:.3}");
    }
    cost::grouped(x.round() as u64)
}

/// A unit price without trailing zeros (`0.0000166667`, `0.4`).
fn price(p: f64) -> String {
    let text = format!("{p:.10}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}
