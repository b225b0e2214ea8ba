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
