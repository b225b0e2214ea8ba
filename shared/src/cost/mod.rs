//! What a stage costs on AWS: the list prices ([`PRICES`]) and a month of a catalog priced
//! from its schedules and the requests a run makes ([`month`]), for `schedkit cost`; the
//! benchmark prices a million jobs with the same table.

mod month;
mod prices;

pub use month::{
    ACCOUNTANT_CHECKS_PER_DAY, Assumptions, Estimate, INTERFACE_ENDPOINTS, LOG_BYTES_PER_RUN, Line,
    METRICS_PER_JOB, Stack, WORKER_MS_PER_RUN, firings, month,
};
pub use prices::{PRICES, PRICES_AS_OF, Prices};

/// `n` with its thousands grouped (`1,259`), as the estimate and the docs write figures.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
