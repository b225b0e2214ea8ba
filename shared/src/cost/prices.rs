//! AWS's list prices that a stage's bill is made of: one table, read by `schedkit cost` and
//! by the benchmark's cost per million jobs.

/// List prices in USD, us-east-1, x86, on-demand, without the free tier.
#[derive(Debug, Clone, Copy)]
pub struct Prices {
    /// Lambda compute, per GB-second (x86).
    pub lambda_gb_second: f64,
    /// Lambda, per request (invocation).
    pub lambda_request: f64,
    /// DynamoDB on-demand, per write request unit.
    pub dynamodb_write_unit: f64,
    /// DynamoDB on-demand, per read request unit.
    pub dynamodb_read_unit: f64,
    /// DynamoDB standard table class, per GB stored for a month.
    pub dynamodb_gb_month: f64,
    /// SQS standard queue, per request (each 64 KiB of a payload counts as one).
    pub sqs_request: f64,
    /// EventBridge Scheduler, per invocation (a firing delivered).
    pub scheduler_invocation: f64,
    /// Step Functions standard workflows, per state transition.
    pub sfn_transition: f64,
    /// CloudWatch, per alarm a month (standard resolution).
    pub alarm_month: f64,
    /// CloudWatch, per dashboard a month.
    pub dashboard_month: f64,
    /// CloudWatch, per custom metric a month (prorated by the hours it is published).
    pub metric_month: f64,
    /// CloudWatch Logs, per GB ingested (standard class).
    pub logs_gb: f64,
    /// A VPC interface endpoint, per Availability Zone and hour.
    pub interface_endpoint_az_hour: f64,
}

/// AWS's public list prices for us-east-1 (DynamoDB on-demand after its November 2024
/// cut). Prices change: [`PRICES_AS_OF`] says when these were read, and `schedkit cost`
/// prints it beside every estimate.
pub const PRICES: Prices = Prices {
    lambda_gb_second: 0.000_016_666_7,
    lambda_request: 0.20 / 1e6,
    dynamodb_write_unit: 0.625 / 1e6,
    dynamodb_read_unit: 0.125 / 1e6,
    dynamodb_gb_month: 0.25,
    sqs_request: 0.40 / 1e6,
    scheduler_invocation: 1.00 / 1e6,
    sfn_transition: 0.025 / 1e3,
    alarm_month: 0.10,
    dashboard_month: 3.00,
    metric_month: 0.30,
    logs_gb: 0.50,
    interface_endpoint_az_hour: 0.01,
};

/// When and where [`PRICES`] were read.
pub const PRICES_AS_OF: &str = "AWS list prices for us-east-1 as of 2026-12-01 (x86, on-demand, standard classes; no free tier)";
