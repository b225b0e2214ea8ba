//! A month of a catalog, priced: the firings its schedules make, what each run costs in
//! requests (the counts `make bench` measures on the wire), and the stage's fixed costs.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::prices::Prices;
use crate::catalog::{Catalog, Chain, Job, RunsOn};
use crate::job::Overlap;
use crate::schedule::Schedule;

/// What a run does besides its job's own work, as `make bench` counts it on the wire for a
/// successful run: a claim and an outcome written to DynamoDB; the scheduler's send, a
/// receive, a hide and a delete on SQS; about 17 ms of the worker's own time on Lambda
/// (the batch of ten I/O-bound jobs, per job).
pub const WORKER_MS_PER_RUN: f64 = 17.0;

/// The bytes of CloudWatch Logs a run writes: its JSON log lines and its EMF metrics line
/// (about four lines of 500 bytes; more with `SCHEDKIT_LOG_PAYLOADS=1`).
pub const LOG_BYTES_PER_RUN: f64 = 2048.0;

/// The metrics a job publishes on every run (`Started`, `Succeeded`, `Duration`,
/// `ScheduleLag`, by `Stage` and `Job`); CloudWatch prorates each by the hours it is sent.
pub const METRICS_PER_JOB: f64 = 4.0;

/// How often the accountant checks a stage (its schedule in the template).
pub const ACCOUNTANT_CHECKS_PER_DAY: f64 = 288.0;

/// The stage's interface endpoints when `CreateVpcEndpoints` is on (SQS, Scheduler, Step
/// Functions; DynamoDB's gateway endpoint is free).
pub const INTERFACE_ENDPOINTS: f64 = 3.0;

/// What the estimate cannot read from the catalog.
#[derive(Debug, Clone)]
pub struct Assumptions {
    /// The month's length.
    pub days: u32,
    /// From when the schedules are counted.
    pub from: DateTime<Utc>,
    /// A run's own work, on average (the worker's time is added).
    pub run_seconds: f64,
    /// The worker function's memory setting.
    pub memory_mb: f64,
    /// Polling workers serving host jobs (each long-polls its queue while idle).
    pub host_pollers: u32,
    /// Availability Zones of the VPC interface endpoints (0: no endpoints).
    pub endpoint_azs: u32,
}

impl Default for Assumptions {
    fn default() -> Self {
        Assumptions {
            days: 30,
            from: Utc::now(),
            run_seconds: 1.0,
            memory_mb: 128.0,
            host_pollers: 1,
            endpoint_azs: 0,
        }
    }
}

/// What the deployed stack holds that is billed by the month, counted from the template
/// `schedkit iac render` writes for the catalog.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stack {
    /// CloudWatch alarms (the stage's, the jobs' own, one per chain).
    pub alarms: usize,
    /// CloudWatch dashboards (the stage has one).
    pub dashboards: usize,
}

/// One line of the bill.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// What is billed (`SQS requests`).
    pub item: String,
    /// How many units the month uses.
    pub quantity: f64,
    /// What one unit is (`request`, `GB-second`).
    pub unit: &'static str,
    /// The price of one unit, USD.
    pub unit_price: f64,
    /// The line's total, USD.
    pub usd: f64,
}

/// A month's estimate.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    /// The month's length in days.
    pub days: u32,
    /// Firings of the catalog's schedules (jobs and chains) in the month.
    pub firings: f64,
    /// Runs of jobs: scheduled, and as steps of scheduled chains.
    pub runs: f64,
    /// Runs of scheduled chains.
    pub chain_runs: f64,
    /// The bill, by what is billed.
    pub lines: Vec<Line>,
    /// When the prices were read ([`super::PRICES_AS_OF`]).
    pub prices_as_of: &'static str,
}

impl Estimate {
    /// The month, USD.
    pub fn total(&self) -> f64 {
        self.lines.iter().map(|l| l.usd).sum()
    }
}

/// Firings of `schedule` in `days` from `from`. A schedule firing more than hourly is
/// counted over a week and scaled (a minute's job is 10,080 firings a week, not 43,200
/// evaluated one by one); others over the whole span.
pub fn firings(schedule: &Schedule, from: DateTime<Utc>, days: u32) -> f64 {
    let mut schedule = schedule.clone();
    // A rate schedule counts from its creation: as if made at `from`.
    schedule.created.get_or_insert(from);
    let to = from + Duration::days(i64::from(days));
    let week = (from + Duration::days(7)).min(to);
    let in_week = schedule.between(from, week).len() as f64;
    if days > 7 && in_week > 7.0 * 24.0 {
        in_week * f64::from(days) / 7.0
    } else {
        schedule.between(from, to).len() as f64
    }
}

/// The month of `catalog` at `prices`.
pub fn month(catalog: &Catalog, stack: Stack, a: &Assumptions, prices: &Prices) -> Estimate {
    let enabled = |s: Option<&crate::catalog::ScheduleSpec>| s.is_none_or(|s| s.enabled);
    let chain_runs: Vec<(&Chain, f64)> = catalog
        .chains
        .values()
        .filter(|c| enabled(c.spec.schedule.as_ref()))
        .map(|c| {
            (
                c,
                c.schedule
                    .as_ref()
                    .map_or(0.0, |s| firings(s, a.from, a.days)),
            )
        })
        .collect();
    let mut bill = Bill::default();
    let mut job_firings = 0.0;
    for job in catalog.jobs.values() {
        let scheduled = match &job.schedule {
            Some(s) if enabled(job.spec.schedule.as_ref()) => firings(s, a.from, a.days),
            _ => 0.0,
        };
        job_firings += scheduled;
        let as_step: f64 = chain_runs
            .iter()
            .map(|(chain, runs)| runs * chain.steps().filter(|s| s.job == job.name).count() as f64)
            .sum();
        bill.add_runs(job, scheduled + as_step, a);
    }
    let chain_firings: f64 = chain_runs.iter().map(|(_, runs)| runs).sum();
    let transitions: f64 = chain_runs
        .iter()
        .map(|(chain, runs)| runs * states(&crate::iac::definition(catalog, chain)))
        .sum();
    bill.fixed(catalog, a, job_firings + chain_firings);
    let lines = priced(&bill, transitions, stack, a, prices);
    Estimate {
        days: a.days,
        firings: job_firings + chain_firings,
        runs: bill.runs,
        chain_runs: chain_firings,
        lines,
        prices_as_of: super::prices::PRICES_AS_OF,
    }
}

/// The month's usage at `p`, line by line.
fn priced(bill: &Bill, transitions: f64, stack: Stack, a: &Assumptions, p: &Prices) -> Vec<Line> {
    let days = f64::from(a.days);
    [
        (
            "EventBridge Scheduler firings",
            bill.scheduler + ACCOUNTANT_CHECKS_PER_DAY * days,
            "invocation",
            p.scheduler_invocation,
        ),
        ("SQS requests", bill.sqs, "request", p.sqs_request),
        (
            "DynamoDB writes",
            bill.write_units,
            "write unit",
            p.dynamodb_write_unit,
        ),
        (
            "DynamoDB reads",
            bill.read_units,
            "read unit",
            p.dynamodb_read_unit,
        ),
        (
            "DynamoDB storage (records kept)",
            bill.stored_gb,
            "GB-month",
            p.dynamodb_gb_month,
        ),
        (
            "Lambda requests",
            bill.invocations,
            "request",
            p.lambda_request,
        ),
        (
            "Lambda compute",
            bill.gb_seconds,
            "GB-second",
            p.lambda_gb_second,
        ),
        (
            "Step Functions transitions",
            transitions,
            "transition",
            p.sfn_transition,
        ),
        ("CloudWatch Logs ingested", bill.log_gb, "GB", p.logs_gb),
        (
            "CloudWatch metrics",
            bill.metric_months,
            "metric-month",
            p.metric_month,
        ),
        (
            "CloudWatch alarms",
            stack.alarms as f64,
            "alarm-month",
            p.alarm_month,
        ),
        (
            "CloudWatch dashboard",
            stack.dashboards as f64,
            "dashboard-month",
            p.dashboard_month,
        ),
        (
            "VPC interface endpoints",
            INTERFACE_ENDPOINTS * f64::from(a.endpoint_azs) * 24.0 * days,
            "AZ-hour",
            p.interface_endpoint_az_hour,
        ),
    ]
    .into_iter()
    .map(|(item, quantity, unit, unit_price)| Line {
        item: item.into(),
        quantity,
        unit,
        unit_price,
        usd: quantity * unit_price,
    })
    .collect()
}

/// The usage the month adds up, before prices.
#[derive(Debug, Default)]
struct Bill {
    runs: f64,
    scheduler: f64,
    sqs: f64,
    write_units: f64,
    read_units: f64,
    stored_gb: f64,
    invocations: f64,
    gb_seconds: f64,
    log_gb: f64,
    metric_months: f64,
}

const GB: f64 = 1024.0 * 1024.0 * 1024.0;

impl Bill {
    /// `runs` runs of `job` in the month.
    fn add_runs(&mut self, job: &Job, runs: f64, a: &Assumptions) {
        if runs == 0.0 {
            return;
        }
        let lease = job.policy.lease.as_secs_f64();
        let beat = job
            .policy
            .heartbeat
            .map_or(lease / 4.0, |h| h.as_secs_f64());
        let heartbeats = (a.run_seconds / beat.max(1.0)).floor();
        // A command's record keeps its output's tail (up to 2 KiB): three write units.
        let record_kb = if job.spec.command.is_some() { 3.0 } else { 1.0 };
        let slot = if job.policy.overlap == Overlap::Allow {
            0.0
        } else {
            2.0
        };
        let permits = 2.0 * job.policy.flow.limits.len() as f64;
        self.runs += runs;
        self.write_units += runs * (1.0 + record_kb + heartbeats + slot + permits);
        // Sent (by the scheduler or Step Functions), received, hidden for the lease,
        // deleted; a heartbeat extends the hiding.
        self.sqs += runs * (4.0 + heartbeats);
        if job.spec.runs_on == RunsOn::Lambda {
            self.invocations += runs;
            let seconds = a.run_seconds + WORKER_MS_PER_RUN / 1000.0;
            self.gb_seconds += runs * seconds * a.memory_mb / 1024.0;
        }
        self.log_gb += runs * LOG_BYTES_PER_RUN / GB;
        let days = f64::from(a.days);
        let hours = (24.0 * days).min(runs);
        self.metric_months += METRICS_PER_JOB * hours / (24.0 * days);
        let kept_days = job.policy.record_retention.as_secs_f64() / 86_400.0;
        self.stored_gb += (runs / days) * kept_days * record_kb * 1024.0 / GB;
    }

    /// The firings themselves, the accountant and the idle polling.
    fn fixed(&mut self, catalog: &Catalog, a: &Assumptions, firings: f64) {
        let days = f64::from(a.days);
        self.scheduler += firings;
        // The accountant: a Lambda run every five minutes that reads the jobs' pauses (a
        // batch of 50), the runs it judges (100 to a batch) and a query, and writes its
        // ledger.
        let checks = ACCOUNTANT_CHECKS_PER_DAY * days;
        let jobs = catalog.jobs.len() as f64;
        let per_check = 2.0 + (jobs / 50.0).ceil() + (firings / checks / 100.0).ceil();
        self.read_units += checks * per_check;
        self.write_units += checks;
        self.invocations += checks;
        self.gb_seconds += checks * 0.3 * a.memory_mb / 1024.0;
        // Long polls while idle: Lambda's event source keeps five pollers (three 20-second
        // receives a minute each); a host's poller one.
        let has_host = catalog
            .jobs
            .values()
            .any(|j| j.spec.runs_on == RunsOn::Host);
        let pollers = 5.0
            + if has_host {
                f64::from(a.host_pollers)
            } else {
                0.0
            };
        self.sqs += pollers * 3.0 * 60.0 * 24.0 * days;
    }
}

/// The states a successful run of a chain's state machine enters (each is a transition):
/// every state of the definition, inside parallel branches too, less the failure paths'.
fn states(definition: &serde_json::Value) -> f64 {
    let Some(all) = definition.get("States").and_then(|s| s.as_object()) else {
        return 0.0;
    };
    all.values()
        .map(|state| {
            let own = match state.get("Type").and_then(|t| t.as_str()) {
                Some("Fail") => 0.0,
                _ => 1.0,
            };
            let branches: f64 = state
                .get("Branches")
                .and_then(|b| b.as_array())
                .map(|b| b.iter().map(states).sum())
                .unwrap_or(0.0);
            own + branches
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::PRICES;

    fn catalog(text: &str) -> Catalog {
        Catalog::parse(text, "test.toml").unwrap()
    }

    fn from() -> DateTime<Utc> {
        "2027-01-04T00:00:00Z".parse().unwrap()
    }

    fn line<'a>(e: &'a Estimate, item: &str) -> &'a Line {
        e.lines.iter().find(|l| l.item == item).unwrap()
    }

    fn assumptions() -> Assumptions {
        Assumptions {
            from: from(),
            ..Assumptions::default()
        }
    }

    #[test]
    fn an_hourly_job_fires_720_times_in_30_days_each_a_scheduler_invocation_and_a_lambda_run() {
        let c =
            catalog("[jobs.hourly]\nowner = \"t\"\nschedule = { expression = \"rate(1 hour)\" }\n");
        let e = month(&c, Stack::default(), &assumptions(), &PRICES);
        assert_eq!(e.firings, 720.0);
        assert_eq!(e.runs, 720.0);
        // The job's firings and the accountant's own schedule.
        let scheduler = line(&e, "EventBridge Scheduler firings");
        assert_eq!(scheduler.quantity, 720.0 + 288.0 * 30.0);
        assert!((scheduler.usd - scheduler.quantity * 1e-6).abs() < 1e-12);
        // Its runs and the accountant's checks.
        assert_eq!(line(&e, "Lambda requests").quantity, 720.0 + 288.0 * 30.0);
        assert!((e.total() - e.lines.iter().map(|l| l.usd).sum::<f64>()).abs() < 1e-12);
    }

    #[test]
    fn a_minutes_job_is_counted_over_a_week_and_scaled_and_a_weekday_job_exactly() {
        let c = catalog(concat!(
            "[jobs.minutely]\nowner = \"t\"\nschedule = { expression = \"rate(1 minute)\" }\n",
            "[jobs.weekdays]\nowner = \"t\"\nschedule = { expression = \"cron(0 9 ? * MON-FRI *)\", timezone = \"Europe/Lisbon\" }\n",
        ));
        let minutely = c.jobs["minutely"].schedule.as_ref().unwrap();
        assert_eq!(firings(minutely, from(), 30), 43_200.0);
        let weekdays = c.jobs["weekdays"].schedule.as_ref().unwrap();
        // From Monday 4 January 2027: four whole weeks and two days (Monday, Tuesday).
        assert_eq!(firings(weekdays, from(), 30), 22.0);
    }

    #[test]
    fn a_host_job_costs_no_lambda_time_and_a_disabled_one_nothing() {
        let c = catalog(concat!(
            "[jobs.etl]\nowner = \"t\"\nruns_on = \"host\"\ncommand = { run = \"true\" }\n",
            "schedule = { expression = \"cron(0 2 * * ? *)\" }\n",
            "[jobs.off]\nowner = \"t\"\nschedule = { expression = \"rate(1 minute)\", enabled = false }\n",
        ));
        let e = month(&c, Stack::default(), &assumptions(), &PRICES);
        assert_eq!(e.runs, 30.0);
        // The accountant's invocations alone.
        assert_eq!(line(&e, "Lambda requests").quantity, 288.0 * 30.0);
        // Each run: a claim and a record with the output's tail (3 units); a one-second
        // run sends no heartbeat (a quarter of the default lease is 15 s).
        let accountant = 288.0 * 30.0;
        assert_eq!(
            line(&e, "DynamoDB writes").quantity,
            accountant + 30.0 * 4.0
        );
    }

    #[test]
    fn a_chains_runs_are_its_steps_runs_and_its_transitions() {
        let c = catalog(concat!(
            "[jobs.a]\nowner = \"t\"\n[jobs.b]\nowner = \"t\"\n[jobs.c]\nowner = \"t\"\n",
            "[chains.nightly]\nowner = \"t\"\nstages = [\"a\", [\"b\", \"c\"]]\n",
            "schedule = { expression = \"cron(0 1 * * ? *)\" }\n",
        ));
        let e = month(&c, Stack::default(), &assumptions(), &PRICES);
        assert_eq!(e.chain_runs, 30.0);
        assert_eq!(e.runs, 90.0, "three steps a night");
        let per_run = states(&crate::iac::definition(&c, &c.chains["nightly"]));
        assert!(
            per_run >= 4.0,
            "a step, a parallel state and its two branches"
        );
        assert_eq!(
            line(&e, "Step Functions transitions").quantity,
            30.0 * per_run
        );
    }

    #[test]
    fn the_stacks_alarms_and_dashboard_and_the_endpoints_are_billed_by_the_month() {
        let c = catalog("[jobs.a]\nowner = \"t\"\n");
        let a = Assumptions {
            endpoint_azs: 2,
            ..assumptions()
        };
        let e = month(
            &c,
            Stack {
                alarms: 12,
                dashboards: 1,
            },
            &a,
            &PRICES,
        );
        assert!((line(&e, "CloudWatch alarms").usd - 1.2).abs() < 1e-9);
        assert!((line(&e, "CloudWatch dashboard").usd - 3.0).abs() < 1e-9);
        assert!((line(&e, "VPC interface endpoints").usd - 3.0 * 2.0 * 720.0 * 0.01).abs() < 1e-9);
    }
}
