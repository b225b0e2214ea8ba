//! What the benchmark binaries share: counting requests on the wire ([`wire`]), and the
//! parts of `peer-bench` (`make bench`): the sides, each measurement, the cost model and
//! the report.

pub mod accountant;
pub mod behind_backlog;
pub mod catalog_size;
pub mod cost;
pub mod flow_control;
pub mod head_of_line;
pub mod headline;
pub mod lambda_mode;
pub mod profile;
pub mod redrive;
pub mod report;
pub mod seed;
pub mod sides;
pub mod sqs;
pub mod stats;
pub mod throughput;
pub mod web_page;
pub mod wire;
