//! What a million jobs cost on AWS for each side: from the measured duration per job and
//! memory (Lambda's GB-seconds), invocations (batches of 10), the DynamoDB write and read
//! units the requests consume (from the requests counted on the wire and the size of the
//! items written), and the SQS requests, at the public list prices below.

use crate::wire::{Counts, TRANSACTION_ITEM};

/// The list prices are the library's, one table for the benchmark and `schedkit cost`.
pub use schedkit::cost::{PRICES, PRICES_AS_OF, Prices};

/// The smallest memory Lambda allows.
pub const LAMBDA_MIN_MEMORY_MB: f64 = 128.0;

/// What one side's job needs, per job.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// Billed duration per job: a batch's duration divided by its jobs.
    pub duration_ms: f64,
    /// The function's memory setting.
    pub memory_mb: f64,
    pub invocations: f64,
    pub write_units: f64,
    pub read_units: f64,
    pub sqs_requests: f64,
}

/// USD per million jobs, by what is billed.
#[derive(Debug, Clone, Copy)]
pub struct Cost {
    pub lambda_compute: f64,
    pub lambda_requests: f64,
    pub dynamodb: f64,
    pub sqs: f64,
}

impl Cost {
    pub fn total(&self) -> f64 {
        self.lambda_compute + self.lambda_requests + self.dynamodb + self.sqs
    }
}

impl Usage {
    pub fn cost_per_million(&self, p: &Prices) -> Cost {
        let m = 1e6;
        Cost {
            lambda_compute: m * self.duration_ms / 1000.0 * self.memory_mb / 1024.0
                * p.lambda_gb_second,
            lambda_requests: m * self.invocations * p.lambda_request,
            dynamodb: m
                * (self.write_units * p.dynamodb_write_unit
                    + self.read_units * p.dynamodb_read_unit),
            sqs: m * self.sqs_requests * p.sqs_request,
        }
    }
}

/// The memory setting a process of `peak_rss_mb` needs: the next whole MB, at least 128.
pub fn memory_setting(peak_rss_mb: f64) -> f64 {
    peak_rss_mb.ceil().max(LAMBDA_MIN_MEMORY_MB)
}

/// DynamoDB's units for the requests in `counts`: (write units, read units). A write
/// costs a unit per KB of its item (at least one, whether or not its condition holds), an
/// item of a transaction twice that; a read a unit per 4 KB (strongly consistent, the
/// upper bound). `item_bytes(table)` is the mean size of the table's items.
pub fn capacity_units(counts: &Counts, item_bytes: impl Fn(&str) -> f64) -> (f64, f64) {
    let (mut writes, mut reads) = (0.0, 0.0);
    let kb = |table: &str, per: f64| (item_bytes(table) / per).ceil().max(1.0);
    for ((op, table), n) in counts {
        let n = *n as f64;
        let name = op.rsplit('.').next().unwrap_or_default();
        if op == TRANSACTION_ITEM {
            writes += n * 2.0 * kb(table, 1024.0);
        } else if !op.starts_with("DynamoDB") {
            continue;
        } else if matches!(name, "PutItem" | "UpdateItem" | "DeleteItem") {
            writes += n * kb(table, 1024.0);
        } else if matches!(name, "GetItem" | "Query" | "Scan") {
            reads += n * kb(table, 4096.0);
        }
    }
    (writes, reads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transactions_items_cost_twice_and_large_items_more() {
        let counts: Counts = [
            (
                ("DynamoDB_20120810.UpdateItem".into(), "records".into()),
                10,
            ),
            (
                (
                    "DynamoDB_20120810.TransactWriteItems".into(),
                    "(transaction)".into(),
                ),
                5,
            ),
            ((TRANSACTION_ITEM.into(), "records".into()), 5),
            ((TRANSACTION_ITEM.into(), "effects".into()), 5),
            (("DynamoDB_20120810.GetItem".into(), "effects".into()), 4),
            (("AmazonSQS.ReceiveMessage".into(), String::new()), 7),
        ]
        .into_iter()
        .collect();
        let size = |t: &str| if t == "records" { 1500.0 } else { 200.0 };
        // Records: 10 updates of 2 KB, 5 transaction items at 2 × 2; effects: 5 at 2 × 1.
        assert_eq!(capacity_units(&counts, size), (20.0 + 20.0 + 10.0, 4.0));
    }

    #[test]
    fn a_million_jobs_cost_what_the_prices_say() {
        let usage = Usage {
            duration_ms: 10.0,
            memory_mb: 1024.0,
            invocations: 0.1,
            write_units: 2.0,
            read_units: 0.0,
            sqs_requests: 0.2,
        };
        let cost = usage.cost_per_million(&PRICES);
        assert!((cost.lambda_compute - 0.166_667).abs() < 1e-6);
        assert!((cost.lambda_requests - 0.02).abs() < 1e-9);
        assert!((cost.dynamodb - 1.25).abs() < 1e-9);
        assert!((cost.sqs - 0.08).abs() < 1e-9);
        assert_eq!(memory_setting(20.4), 128.0);
        assert_eq!(memory_setting(200.2), 201.0);
    }
}
