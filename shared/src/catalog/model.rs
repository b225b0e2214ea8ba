//! The catalog file's shape (`infra/catalog.toml`), as serde reads it. Every table denies
//! unknown fields, so a misspelt setting is an error instead of a silent default.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The whole catalog.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CatalogFile {
    /// Defaults apply when `[settings]` is omitted.
    #[serde(default)]
    pub settings: Settings,
    /// Every job by name, from the `[jobs.<name>]` tables.
    #[serde(default)]
    pub jobs: BTreeMap<String, JobSpec>,
    /// Every multi-step chain by name, from the `[chains.<name>]` tables.
    #[serde(default)]
    pub chains: BTreeMap<String, ChainSpec>,
    /// Flow-control limits jobs share, from the `[limits.<name>]` tables.
    #[serde(default)]
    pub limits: BTreeMap<String, LimitSpec>,
}

/// A limit that every job naming it shares: runs at once, starts per window, or both.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LimitSpec {
    /// Runs of all its jobs at once.
    #[serde(default)]
    pub concurrency: Option<u32>,
    /// Starts per window: `<starts>/<second|minute|hour>` (`20/minute`).
    #[serde(default)]
    pub rate: Option<String>,
    /// A template over payload fields (`{tenant}`): the limit's permits are shared fairly
    /// between the keys it renders that wait for them (each key's runs are handed a
    /// permit in turn). Without it, between the jobs that name the limit.
    #[serde(default)]
    pub fair: Option<String>,
}

/// A job's own concurrency: runs at once, per key when `key` is given.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ConcurrencySpec {
    /// Runs at once (per key).
    pub limit: u32,
    /// A template over payload fields (`{tenant}`): runs of one key count together.
    #[serde(default)]
    pub key: Option<String>,
}

/// A chain: stages run one after another, each one step or a parallel group of steps; a
/// step runs a queue job of the catalog through the worker.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ChainSpec {
    /// What the chain does.
    #[serde(default)]
    pub description: Option<String>,
    /// Who to ask when it pauses.
    pub owner: String,
    /// In order: a step's name, or a list of step names run side by side.
    pub stages: Vec<StageSpec>,
    /// What a step runs, by step name: omitted, a step runs the job of its own name.
    #[serde(default)]
    pub steps: BTreeMap<String, StepSpec>,
    /// The chain's input on scheduled runs; every step sees it.
    #[serde(default)]
    pub payload: Option<Map<String, Value>>,
    /// When the chain starts by itself; omitted, it runs when fired.
    #[serde(default)]
    pub schedule: Option<ScheduleSpec>,
    /// DONE within this long of its scheduled time (`3h`), or the run is late; default for
    /// a scheduled chain: its stages' worst cases added up (see `catalog::deadlines`).
    #[serde(default)]
    pub deadline: Option<String>,
    /// Its steps' priority (`-10` to `10`, default 0), over their jobs': each step's run
    /// carries it, for a freed permit of the step's limits, and above 0 waits in the
    /// urgent queue, so a customer-facing chain's last step never queues behind a backfill.
    #[serde(default)]
    pub priority: Option<i32>,
}

/// One stage as written: `"step"` or `["step-a", "step-b"]`.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    untagged,
    expecting = "must be a step name, or a list of step names run side by side"
)]
pub enum StageSpec {
    /// One step.
    Step(String),
    /// Steps run side by side; the stage ends when all have.
    Parallel(Vec<String>),
}

/// What one step of a chain runs.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    /// The queue job it runs (default: the job named like the step).
    #[serde(default)]
    pub job: Option<String>,
    /// The step's own payload, given to the job with the chain's.
    #[serde(default)]
    pub payload: Option<Map<String, Value>>,
}

/// Settings shared by every job.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// The EventBridge Scheduler schedule group the catalog owns.
    pub schedule_group: String,
    /// The worker function's timeout: no lease or job timeout may exceed it.
    pub function_timeout_seconds: u32,
    /// Message retention of the jobs queue and of its DLQ: records must outlive both.
    pub queue_retention_days: u32,
    /// The DLQ's message retention; records must outlive it as well.
    pub dlq_retention_days: u32,
    /// How long a secret's value is kept before it is fetched again (a rotated secret
    /// reaches the worker within this).
    pub secrets_max_age_seconds: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            schedule_group: "schedkit".into(),
            function_timeout_seconds: 60,
            queue_retention_days: 4,
            dlq_retention_days: 14,
            secrets_max_age_seconds: 300,
        }
    }
}

/// One job.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// What the job does, for people reading the catalog and the console.
    #[serde(default)]
    pub description: Option<String>,
    /// Who to ask when it fails (a team or an address).
    pub owner: String,
    /// `queue` (the worker's jobs queue) or `chain:<state machine>`.
    #[serde(default = "default_target")]
    pub target: String,
    /// Derives the execution key from payload fields (`invoice:{billing_month}:{tenant}`).
    #[serde(default)]
    pub key_template: Option<String>,
    /// The payload every scheduled run carries.
    #[serde(default)]
    pub payload: Option<Map<String, Value>>,
    /// How long a claim stays exclusive without a heartbeat: 1 up to the function timeout.
    #[serde(default = "default_lease")]
    pub lease_seconds: u32,
    /// Default: a quarter of the lease.
    #[serde(default)]
    pub heartbeat_seconds: Option<u32>,
    /// An attempt running longer fails (retryably); its process group, for a command, is
    /// ended. Omitted: the most where it runs (the function's timeout on Lambda,
    /// [`HOST_TIMEOUT_MAX_SECONDS`] on a host).
    #[serde(default)]
    pub timeout_seconds: Option<u32>,
    /// Default: queue + DLQ retention + 3 days.
    #[serde(default)]
    pub record_retention_days: Option<u32>,
    /// Omitted: the default (5 attempts; 5 s, then 60 s doubling up to 15 minutes).
    #[serde(default)]
    pub retry: RetrySpec,
    /// `allow` (default), `skip` or `buffer_one`: a run that arrives while an earlier run
    /// of the job is RUNNING runs anyway, is SKIPPED, or waits (one at most).
    #[serde(default)]
    pub overlap: crate::job::Overlap,
    /// Pause the job's schedule after this many consecutive FAILED runs (the worker does,
    /// through the Scheduler API); `schedkit jobs resume` starts it again. Omitted: never.
    #[serde(default)]
    pub pause_after_failures: Option<u32>,
    /// Omitted for jobs that only run when fired (one-off, or by hand).
    #[serde(default)]
    pub schedule: Option<ScheduleSpec>,
    /// The `[limits.<name>]` the job's runs count against.
    #[serde(default)]
    pub limits: Vec<String>,
    /// The job's own concurrency (`{ limit = 1, key = "{account}" }`).
    #[serde(default)]
    pub concurrency: Option<ConcurrencySpec>,
    /// A run that waited longer than this for its limits is dead-lettered (`limit-wait`).
    /// Omitted: it waits as long as the queue keeps its message.
    #[serde(default)]
    pub max_wait_seconds: Option<u32>,
    /// Which of the runs waiting for a limit gets a freed permit first: higher first
    /// (`-10` to `10`, default 0; `schedkit fire --priority` sets a run's own). A waiting
    /// run rises one level every 10 s it waits, up to the highest waiting, so none waits
    /// behind higher priorities forever. Above 0, the job's scheduled and fired runs wait
    /// in the urgent queue beside the jobs queue, never behind its backlog (a job without
    /// limits too; a backfill stays in the jobs queue).
    #[serde(default)]
    pub priority: Option<i32>,
    /// DONE within this long of its scheduled time (`45m`), or the run is late; default
    /// for a scheduled job: its retry policy's worst case (see `catalog::deadlines`).
    #[serde(default)]
    pub deadline: Option<String>,
    /// The implementation the job runs: a name given to `Jobs::add`. Omitted: the job's
    /// own name. Many jobs may share one (a catalog of a thousand jobs is mostly a few
    /// implementations with their payloads).
    #[serde(default)]
    pub handler: Option<String>,
    /// An alarm of the job's own on its failures, beside the stage's alarm that covers
    /// every job (at most [`OWN_ALARMS_MAX`] jobs: each is a resource of the stack).
    #[serde(default)]
    pub own_alarm: bool,
    /// Where its runs go: `lambda` (default; bounded by the function's timeout) or `host`
    /// (the stage's polling workers, on a queue of their own; bounded by the job's own
    /// timeout, up to [`HOST_TIMEOUT_MAX_SECONDS`]).
    #[serde(default)]
    pub runs_on: RunsOn,
    /// A command each run executes, instead of an implementation in Rust.
    #[serde(default)]
    pub command: Option<CommandSpec>,
    /// Parameters and secrets the job reads, by the name it reads them under:
    /// `{ DB_URL = "ssm:/team/db-url", API_KEY = "secretsmanager:prod/partner" }`. The
    /// template grants the worker exactly these; a command gets each in its environment.
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
}

/// The most distinct secret sources a catalog may list: each is named in the worker's
/// policy, whose inline size is bounded (10,240 characters).
pub const SECRETS_MAX: usize = 100;

impl JobSpec {
    /// The longest one attempt may be given where it runs: the function's timeout on
    /// Lambda, [`HOST_TIMEOUT_MAX_SECONDS`] on a host. Also its timeout when it gives none.
    pub fn timeout_limit(&self, settings: &Settings) -> u32 {
        match self.runs_on {
            RunsOn::Lambda => settings.function_timeout_seconds,
            RunsOn::Host => HOST_TIMEOUT_MAX_SECONDS,
        }
    }

    /// Its timeout: as given, else [`JobSpec::timeout_limit`].
    pub fn timeout(&self, settings: &Settings) -> u32 {
        self.timeout_seconds
            .unwrap_or_else(|| self.timeout_limit(settings))
    }
}

/// Where a job's runs go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum RunsOn {
    /// The worker function (its SQS event source), bounded by its timeout (15 minutes at
    /// most, Lambda's limit).
    #[default]
    Lambda,
    /// The polling workers of the stage's host queue (a container, a VM): runs of hours.
    Host,
}

impl RunsOn {
    /// As the catalog writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunsOn::Lambda => "lambda",
            RunsOn::Host => "host",
        }
    }
}

/// The longest a host job's attempt may run: SQS keeps a received message invisible for at
/// most 12 hours from its receive, however often a heartbeat extends it, and the worker
/// needs the last minutes to record the outcome. Also a host job's timeout when it gives none
/// (cron gave none either).
pub const HOST_TIMEOUT_MAX_SECONDS: u32 = 12 * 3600 - 300;

/// A run that is a process: the command line, run by a shell as cron runs it, in a process
/// group of its own that the attempt's end (timeout, lost lease, shutdown) terminates.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// The command line, given to `shell -c`.
    pub run: String,
    /// The shell that runs it (`/bin/sh`, as cron's default).
    #[serde(default = "default_shell")]
    pub shell: String,
    /// Variables of the process. It does not inherit the worker's environment (on Lambda,
    /// the role's credentials): it gets `PATH`, `HOME`, the locale, `TZ`, `TMPDIR`, the
    /// user and the AWS Region from it, then these, its secrets and its run's `SCHEDKIT_*`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Text given on its standard input (otherwise it reads nothing).
    #[serde(default)]
    pub stdin: Option<String>,
    /// The directory it runs in (the worker's when omitted).
    #[serde(default)]
    pub working_dir: Option<String>,
    /// Exit codes no retry can fix: the run ends FAILED at once, to the dead-letter queue.
    /// Any other non-zero code is retried by the job's retry policy.
    #[serde(default)]
    pub permanent_exit_codes: Vec<i32>,
    /// Seconds between SIGTERM to its process group and SIGKILL when an attempt is ended
    /// (10 when omitted). A retry waits at least this and 2 s more, so that it never runs
    /// beside the process of the attempt before it.
    #[serde(default = "default_grace")]
    pub grace_seconds: u32,
}

fn default_shell() -> String {
    "/bin/sh".into()
}

fn default_grace() -> u32 {
    10
}

/// The most jobs that may ask for an alarm of their own (`own_alarm`): the stack's
/// resources and the template's bytes stay bounded whatever the catalog's size.
pub const OWN_ALARMS_MAX: usize = 20;

/// The most chains a catalog may have: each is a state machine and an alarm in the stack,
/// which CloudFormation caps at 500 resources (the rest of the stack is about 40, and
/// [`OWN_ALARMS_MAX`] more at most).
pub const CHAINS_MAX: usize = 200;

/// The most scheduled jobs and chains a catalog has without a warning: the accountant's
/// ledger, one item of at most 400 KB, keeps an entry for each (at most about 145 bytes,
/// with a 64-character name: three quarters of the item for 2,000), with room left for its
/// findings (`accounting::ledger::tests::the_most_scheduled_names_leave_the_ledger_room`).
pub const SCHEDULED_MAX: usize = 2_000;

fn default_target() -> String {
    "queue".into()
}

fn default_lease() -> u32 {
    60
}

/// The job's retry policy (the worker's, not the scheduler's delivery retries).
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct RetrySpec {
    /// Attempts in one round, the first included; a redrive starts a fresh round.
    pub max_attempts: u32,
    /// Nominal delay after the first failure (the quick retry).
    pub first_delay_seconds: u32,
    /// Nominal delay after the second failure; doubles after each further one.
    pub base_delay_seconds: u32,
    /// Upper bound of the nominal delay; jitter only shortens it.
    pub max_delay_seconds: u32,
}

impl Default for RetrySpec {
    fn default() -> Self {
        let d = crate::retry::RetryPolicy::default();
        RetrySpec {
            max_attempts: d.max_attempts,
            first_delay_seconds: d.first_delay.as_secs() as u32,
            base_delay_seconds: d.base_delay.as_secs() as u32,
            max_delay_seconds: d.max_delay.as_secs() as u32,
        }
    }
}

/// When the job runs: an EventBridge Scheduler schedule.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// `cron(...)`, `rate(...)` or `at(...)`.
    pub expression: String,
    /// IANA name; `UTC` when omitted.
    #[serde(default = "default_timezone")]
    pub timezone: String,
    /// Spread each firing over this many minutes (0: fire on time).
    #[serde(default)]
    pub flexible_window_minutes: u32,
    /// RFC 3339, as a TOML date-time (`2030-01-01T00:00:00Z`) or a string.
    #[serde(default, deserialize_with = "instant")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    pub start: Option<DateTime<Utc>>,
    /// RFC 3339, like `start`: nothing fires at or after it.
    #[serde(default, deserialize_with = "instant")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    pub end: Option<DateTime<Utc>>,
    /// False keeps the schedule but syncs it DISABLED: it does not fire.
    #[serde(default = "default_enabled")]
    pub enabled: bool,
    /// The scheduler's own delivery retries to the queue (0-185).
    #[serde(default = "default_delivery_retries")]
    pub delivery_retries: u32,
    /// How long the scheduler keeps trying to deliver one firing (60-86400 s).
    #[serde(default = "default_event_age")]
    pub max_event_age_seconds: u32,
}

fn default_timezone() -> String {
    "UTC".into()
}

fn default_enabled() -> bool {
    true
}

fn default_delivery_retries() -> u32 {
    185
}

fn default_event_age() -> u32 {
    86_400
}

/// A TOML offset date-time, or a string holding one.
fn instant<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    let value = toml::value::Datetime::deserialize(d)?;
    DateTime::parse_from_rfc3339(&value.to_string())
        .map(|t| Some(t.with_timezone(&Utc)))
        .map_err(|_| {
            serde::de::Error::custom(format!(
                "`{value}` needs a date, a time and a UTC offset, e.g. 2030-01-01T00:00:00Z"
            ))
        })
}
