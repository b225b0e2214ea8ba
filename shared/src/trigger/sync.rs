//! Schedule sync: make EventBridge Scheduler match the catalog within its schedule group.
//!
//! Sync is the one owner of a stage's schedules; the stack owns the group and tags it with
//! where the schedules send ([`stage_targets`]). Not the template, because a schedule's
//! right form depends on when it is written: AWS refuses a start date more than five
//! minutes ago (so a start that has passed is sent as the next run on its phase), a
//! one-time job whose time has passed is history (not created, left as it is), and a pause
//! made through the Scheduler API must survive the next deploy. A template rendered once
//! cannot know any of these; a sync run at deploy time does.
//!
//! `plan` reads what is there and compares it field by field with what the catalog wants;
//! `apply` performs exactly the planned writes, so a second run plans (and writes) nothing.
//! Both go at the Scheduler's pace ([`super::paced`]): a few calls at once, spaced to a
//! rate, a throttled call tried again; a thousand schedules read in about twenty seconds at
//! the default 50 a second, and written in as many.
//! The catalog owns its group: a schedule in the group that the catalog no longer lists is
//! deleted. One-off jobs live in another group (`<group>-once`) and are never touched.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use chrono::{DateTime, Utc};

use super::TriggerError;
pub use super::paced::Pace;
use super::template::{description, envelope_template};
use crate::aws::{AwsError, AwsResultExt, SdkConfig};
use crate::catalog::{Catalog, Chain, Job};
/// The Scheduler client [`plan`], [`apply`] and [`stage_targets`] take.
pub use aws_sdk_scheduler::Client;
use aws_sdk_scheduler::operation::get_schedule::GetScheduleOutput;
use aws_sdk_scheduler::primitives::DateTime as SmithyTime;
use aws_sdk_scheduler::types::{
    ActionAfterCompletion, DeadLetterConfig, FlexibleTimeWindow, FlexibleTimeWindowMode,
    RetryPolicy, ScheduleState, Target as SchedulerTarget,
};

/// Where the catalog's schedules send their envelopes, and with which role.
#[derive(Debug, Clone)]
pub struct SyncTargets {
    /// The worker's jobs queue.
    pub queue_arn: String,
    /// The host jobs' queue (`runs_on = "host"`); None for a stack made before it had one,
    /// whose host jobs a sync refuses to send anywhere else.
    pub host_queue_arn: Option<String>,
    /// Whether the stage has urgent queues beside its jobs queues (see
    /// [`crate::queue::urgent`]), where the runs of a job of positive priority go; false
    /// for a stack made before it had them.
    pub urgent_queues: bool,
    /// The role EventBridge Scheduler assumes to send (it may only send to the queue and
    /// the schedule DLQ).
    pub role_arn: String,
    /// Where the scheduler puts firings it could not deliver.
    pub dead_letter_arn: Option<String>,
}

impl SyncTargets {
    /// The queue a job's runs go to: the host jobs' queue for `runs_on = "host"`, else the
    /// jobs queue; the urgent queue beside it for a job of positive priority. A host job of
    /// a stage without the host queue is refused: the function would end its runs at its
    /// timeout.
    pub fn queue_of(&self, job: &Job) -> Result<String, TriggerError> {
        use crate::queue::urgent::{is_urgent, urgent_queue_of};
        let queue = self.jobs_queue_of(job)?;
        Ok(match job.spec.priority {
            Some(p) if is_urgent(p) && self.urgent_queues => urgent_queue_of(queue),
            _ => queue.to_string(),
        })
    }

    fn jobs_queue_of(&self, job: &Job) -> Result<&str, TriggerError> {
        match (job.spec.runs_on, &self.host_queue_arn) {
            (crate::catalog::RunsOn::Lambda, _) => Ok(&self.queue_arn),
            (crate::catalog::RunsOn::Host, Some(host)) => Ok(host),
            (crate::catalog::RunsOn::Host, None) => Err(TriggerError::Unroutable(format!(
                "job `{}` runs on a host, but the stage has no host jobs queue (its schedule group has no `{}` tag): deploy the template of this version first",
                job.name,
                tags::HOST_JOBS_QUEUE
            ))),
        }
    }
}

/// A schedule's settings, in the form both sides are compared in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleConfig {
    /// `cron(...)`, `rate(...)` or `at(...)`, as the scheduler stores it.
    pub expression: String,
    /// IANA zone the expression is read in; `UTC` when the scheduler holds none.
    pub timezone: String,
    /// Epoch seconds.
    pub start: Option<i64>,
    /// Epoch seconds; nothing fires at or after it.
    pub end: Option<i64>,
    /// Owner and what the job does, at most 512 characters.
    pub description: String,
    /// False: the schedule is kept but DISABLED, so it does not fire.
    pub enabled: bool,
    /// 0 when the window is off.
    pub flexible_window_minutes: u32,
    /// The jobs queue (a chain's firing is its trigger there: the worker starts it).
    pub target_arn: String,
    /// The role the scheduler assumes to deliver.
    pub role_arn: String,
    /// The envelope template; the scheduler fills its context attributes in at fire time.
    pub input: String,
    /// The scheduler's own delivery retries (0-185), not the worker's.
    pub retry_attempts: u32,
    /// How long the scheduler keeps trying to deliver one firing, in seconds.
    pub max_event_age_seconds: u32,
    /// Where the scheduler puts a firing it cannot deliver; None: the firing is dropped.
    pub dead_letter_arn: Option<String>,
}

impl ScheduleConfig {
    /// What the catalog wants for a scheduled job, sent at `now` (a start date that has
    /// passed is sent as the next run on its phase). `None` for a job without a schedule.
    pub(crate) fn from_job(
        job: &Job,
        targets: &SyncTargets,
        now: DateTime<Utc>,
    ) -> Result<Option<ScheduleConfig>, TriggerError> {
        let (Some(spec), Some(schedule)) = (job.spec.schedule.as_ref(), job.schedule.as_ref())
        else {
            return Ok(None);
        };
        let mut config = ScheduleConfig::of(
            &job.name,
            description(&job.spec.owner, job.spec.description.as_deref()),
            &job.payload(),
            (spec, schedule),
            targets,
            now,
        );
        config.target_arn = targets.queue_of(job)?;
        Ok(Some(config))
    }

    /// What the catalog wants for a scheduled chain: its firings go to the jobs queue as
    /// its trigger (an envelope with the chain's name as job), which the worker turns into
    /// one execution. `None` for a chain without a schedule.
    pub(crate) fn from_chain(
        chain: &Chain,
        targets: &SyncTargets,
        now: DateTime<Utc>,
    ) -> Option<ScheduleConfig> {
        let (spec, schedule) = (chain.spec.schedule.as_ref()?, chain.schedule.as_ref()?);
        Some(ScheduleConfig::of(
            &chain.name,
            description(&chain.spec.owner, chain.spec.description.as_deref()),
            &chain.payload(),
            (spec, schedule),
            targets,
            now,
        ))
    }

    fn of(
        name: &str,
        description: String,
        payload: &serde_json::Map<String, serde_json::Value>,
        (spec, schedule): (&crate::catalog::ScheduleSpec, &crate::schedule::Schedule),
        targets: &SyncTargets,
        now: DateTime<Utc>,
    ) -> ScheduleConfig {
        ScheduleConfig {
            expression: spec.expression.clone(),
            timezone: spec.timezone.clone(),
            start: schedule.start_to_send(now).map(|t| t.timestamp()),
            end: spec.end.map(|t| t.timestamp()),
            description,
            enabled: spec.enabled,
            flexible_window_minutes: spec.flexible_window_minutes,
            target_arn: targets.queue_arn.clone(),
            role_arn: targets.role_arn.clone(),
            input: envelope_template(name, payload),
            retry_attempts: spec.delivery_retries,
            max_event_age_seconds: spec.max_event_age_seconds,
            dead_letter_arn: targets.dead_letter_arn.clone(),
        }
    }

    /// What the scheduler holds.
    pub(crate) fn from_schedule(s: &GetScheduleOutput) -> ScheduleConfig {
        let target = s.target.as_ref();
        let retry = target.and_then(|t| t.retry_policy.as_ref());
        ScheduleConfig {
            expression: s.schedule_expression.clone().unwrap_or_default(),
            timezone: s
                .schedule_expression_timezone
                .clone()
                .unwrap_or_else(|| "UTC".into()),
            start: s.start_date.map(|t| t.secs()),
            end: s.end_date.map(|t| t.secs()),
            description: s.description.clone().unwrap_or_default(),
            enabled: s.state != Some(ScheduleState::Disabled),
            flexible_window_minutes: s
                .flexible_time_window
                .as_ref()
                .filter(|w| w.mode == FlexibleTimeWindowMode::Flexible)
                .and_then(|w| w.maximum_window_in_minutes)
                .unwrap_or(0) as u32,
            target_arn: target.map(|t| t.arn.clone()).unwrap_or_default(),
            role_arn: target.map(|t| t.role_arn.clone()).unwrap_or_default(),
            input: target.and_then(|t| t.input.clone()).unwrap_or_default(),
            retry_attempts: retry.and_then(|r| r.maximum_retry_attempts).unwrap_or(185) as u32,
            max_event_age_seconds: retry
                .and_then(|r| r.maximum_event_age_in_seconds)
                .unwrap_or(86_400) as u32,
            dead_letter_arn: target
                .and_then(|t| t.dead_letter_config.as_ref())
                .and_then(|d| d.arn.clone()),
        }
    }

    /// `field: old → new` for every field that differs.
    pub(crate) fn differences(&self, wanted: &ScheduleConfig) -> Vec<String> {
        let mut out = Vec::new();
        let mut diff = |field: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{field}: {a} → {b}"));
            }
        };
        let opt = |v: &Option<i64>| v.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
        diff(
            "expression",
            self.expression.clone(),
            wanted.expression.clone(),
        );
        diff("timezone", self.timezone.clone(), wanted.timezone.clone());
        diff("start", opt(&self.start), opt(&wanted.start));
        diff("end", opt(&self.end), opt(&wanted.end));
        diff(
            "description",
            self.description.clone(),
            wanted.description.clone(),
        );
        diff(
            "enabled",
            self.enabled.to_string(),
            wanted.enabled.to_string(),
        );
        diff(
            "flexible_window_minutes",
            self.flexible_window_minutes.to_string(),
            wanted.flexible_window_minutes.to_string(),
        );
        diff("target", self.target_arn.clone(), wanted.target_arn.clone());
        diff("role", self.role_arn.clone(), wanted.role_arn.clone());
        diff("input", self.input.clone(), wanted.input.clone());
        diff(
            "delivery_retries",
            self.retry_attempts.to_string(),
            wanted.retry_attempts.to_string(),
        );
        diff(
            "max_event_age_seconds",
            self.max_event_age_seconds.to_string(),
            wanted.max_event_age_seconds.to_string(),
        );
        diff(
            "dead_letter",
            self.dead_letter_arn.clone().unwrap_or_else(|| "-".into()),
            wanted.dead_letter_arn.clone().unwrap_or_else(|| "-".into()),
        );
        out
    }
}

/// One planned write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A scheduled job with no schedule in the group yet.
    Create {
        /// The schedule's name: the job's name.
        name: String,
        /// What the catalog wants.
        config: Box<ScheduleConfig>,
    },
    /// A schedule that differs from the catalog in at least one field.
    Update {
        /// The schedule's name: the job's name.
        name: String,
        /// The whole wanted config: UpdateSchedule replaces every field.
        config: Box<ScheduleConfig>,
        /// `field: old → new` for each field that differs, for the operator to read.
        differences: Vec<String>,
    },
    /// A schedule in the group that the catalog no longer lists.
    Delete {
        /// The schedule's name.
        name: String,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Create { name, config } => write!(
                f,
                "+ create {name}: {} ({}){}",
                config.expression,
                config.timezone,
                if config.enabled { "" } else { ", disabled" }
            ),
            Change::Update {
                name, differences, ..
            } => {
                write!(f, "~ update {name}:")?;
                for d in differences {
                    write!(f, "\n    {d}")?;
                }
                Ok(())
            }
            Change::Delete { name } => write!(f, "- delete {name} (not in the catalog)"),
        }
    }
}

/// What a sync would do.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The catalog's schedule group the plan is for.
    pub group: String,
    /// True when the group does not exist yet; `apply` creates it first.
    pub create_group: bool,
    /// Writes in the order `apply` makes them: creates and updates by job name, then deletes.
    pub changes: Vec<Change>,
    /// Jobs whose schedule has no run left (a one-time job whose time has passed): not
    /// created, and one already in the group is left as it is (it fires no more).
    pub finished: Vec<String>,
    /// The jobs the plan kept DISABLED for their pause (as the pauses were when it read
    /// them; [`keep_pauses`] looks again after the writes).
    pub paused: std::collections::BTreeSet<String>,
}

impl Plan {
    /// True when the scheduler already matches the catalog: `apply` would write nothing.
    pub fn is_empty(&self) -> bool {
        !self.create_group && self.changes.is_empty()
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            write!(
                f,
                "schedule group {}: in sync with the catalog, nothing to do",
                self.group
            )?;
            for name in &self.finished {
                write!(f, "\n  {name}: no run left, left as it is")?;
            }
            return Ok(());
        }
        write!(f, "schedule group {}:", self.group)?;
        if self.create_group {
            write!(f, "\n+ create schedule group {}", self.group)?;
        }
        for c in &self.changes {
            write!(f, "\n{c}")?;
        }
        for name in &self.finished {
            write!(f, "\n  {name}: no run left, left as it is")?;
        }
        Ok(())
    }
}

/// The tag keys by which a stack's schedule group says where its schedules send.
pub mod tags {
    /// Who created the group (`stack <name>`).
    pub const OWNER: &str = "schedkit:owner";
    /// The jobs queue's ARN.
    pub(crate) const JOBS_QUEUE: &str = "schedkit:jobs-queue";
    /// The host jobs queue's ARN.
    pub(crate) const HOST_JOBS_QUEUE: &str = "schedkit:host-jobs-queue";
    /// The urgent jobs queue's ARN: the stage has urgent queues.
    pub(crate) const URGENT_JOBS_QUEUE: &str = "schedkit:urgent-jobs-queue";
    /// The role the scheduler assumes.
    pub const SCHEDULER_ROLE: &str = "schedkit:scheduler-role";
    /// The schedule dead-letter queue's ARN.
    pub(crate) const SCHEDULE_DLQ: &str = "schedkit:schedule-dlq";
}

/// The targets a stack recorded on its schedule group (its tags), so a sync of a stage
/// needs no ARNs and cannot strip the dead-letter queue. None when the group does not
/// exist or no stack made it.
pub async fn stage_targets(
    client: &Client,
    group: &str,
) -> Result<Option<SyncTargets>, TriggerError> {
    let arn = match client.get_schedule_group().name(group).send().await {
        Ok(g) => g.arn.unwrap_or_default(),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_not_found_exception()) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(AwsError::of(format!("reading schedule group {group}"), &e).into()),
    };
    let listed = client
        .list_tags_for_resource()
        .resource_arn(&arn)
        .send()
        .await
        .aws(format!("reading the tags of schedule group {group}"))?;
    let tags: BTreeMap<String, String> = listed
        .tags
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key, t.value))
        .collect();
    let (Some(queue_arn), Some(role_arn)) =
        (tags.get(tags::JOBS_QUEUE), tags.get(tags::SCHEDULER_ROLE))
    else {
        return Ok(None);
    };
    Ok(Some(SyncTargets {
        queue_arn: queue_arn.clone(),
        host_queue_arn: tags.get(tags::HOST_JOBS_QUEUE).cloned(),
        urgent_queues: tags.contains_key(tags::URGENT_JOBS_QUEUE),
        role_arn: role_arn.clone(),
        dead_letter_arn: tags.get(tags::SCHEDULE_DLQ).cloned(),
    }))
}

/// A Scheduler client for [`plan`] and [`apply`], for callers that name no SDK crate (they
/// take the client rather than the configuration, so a caller may bring its own).
pub fn client(sdk: &SdkConfig) -> Client {
    Client::new(sdk)
}

/// How a sync talks to the Scheduler: at what pace, and whom it tells how far it is.
pub struct Options<'a> {
    /// Calls at once, per second, and tries of a throttled one.
    pub pace: Pace,
    /// Called as schedules are read (`"read"`) and written (`"written"`): (what, done, of).
    pub progress: &'a (dyn Fn(&str, usize, usize) + Sync),
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            pace: Pace::default(),
            progress: &|_, _, _| {},
        }
    }
}

/// Compares the catalog with the scheduler's group.
pub async fn plan(
    client: &Client,
    catalog: &Catalog,
    targets: &SyncTargets,
) -> Result<Plan, TriggerError> {
    plan_keeping_paused(client, catalog, targets, &std::collections::BTreeSet::new()).await
}

/// A Scheduler error as sync reports it, and whether it was throttled.
fn throttled(e: &TriggerError) -> bool {
    matches!(e, TriggerError::Aws(a) if super::paced::is_throttling(a.code.as_deref()))
}

/// The schedules of `group` as the scheduler has them, and whether the group is missing
/// (to be created): the names a page at a time (ListSchedules), then each schedule read
/// (GetSchedule: a listing does not carry the target and its input) at the sync's pace.
async fn schedules_in(
    client: &Client,
    group: &str,
    options: &Options<'_>,
) -> Result<(bool, BTreeMap<String, ScheduleConfig>), TriggerError> {
    let create_group = match client.get_schedule_group().name(group).send().await {
        Ok(_) => false,
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_not_found_exception()) =>
        {
            true
        }
        Err(e) => {
            return Err(AwsError::of(format!("reading schedule group {group}"), &e).into());
        }
    };
    let mut current = BTreeMap::new();
    if create_group {
        return Ok((create_group, current));
    }
    let mut names = Vec::new();
    let mut pages = client
        .list_schedules()
        .group_name(group)
        .max_results(100)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        for summary in page.aws("listing schedules")?.schedules {
            names.push(summary.name.unwrap_or_default());
        }
    }
    let progress = |done, total| (options.progress)("read", done, total);
    let read = super::paced::each(&names, options.pace, throttled, &progress, |name| {
        let name = name.clone();
        async move {
            let got = client
                .get_schedule()
                .group_name(group)
                .name(&name)
                .send()
                .await;
            match got {
                Ok(got) => Ok(Some((name, ScheduleConfig::from_schedule(&got)))),
                // Deleted since the listing (a one-time schedule that fired): not there.
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_resource_not_found_exception()) =>
                {
                    Ok(None)
                }
                Err(e) => Err(TriggerError::from(AwsError::of(
                    format!("reading schedule {name}"),
                    &e,
                ))),
            }
        }
    })
    .await;
    for r in read {
        if let Some((name, config)) = r? {
            current.insert(name, config);
        }
    }
    Ok((create_group, current))
}

/// [`plan`], with the `paused` jobs' schedules kept DISABLED (`schedkit jobs pause`): a
/// sync must not undo an operator's pause; `jobs resume` does.
pub async fn plan_keeping_paused(
    client: &Client,
    catalog: &Catalog,
    targets: &SyncTargets,
    paused: &std::collections::BTreeSet<String>,
) -> Result<Plan, TriggerError> {
    plan_with(client, catalog, targets, paused, &Options::default()).await
}

/// [`plan_keeping_paused`] at the pace `options` give, telling their progress.
pub async fn plan_with(
    client: &Client,
    catalog: &Catalog,
    targets: &SyncTargets,
    paused: &std::collections::BTreeSet<String>,
    options: &Options<'_>,
) -> Result<Plan, TriggerError> {
    let group = catalog.settings.schedule_group.clone();
    let (create_group, mut current) = schedules_in(client, &group, options).await?;
    let now = Utc::now();
    let mut changes = Vec::new();
    let mut finished = Vec::new();
    // Every scheduled job, then every scheduled chain (names differ: the catalog says so).
    let mut scheduled = Vec::new();
    for job in catalog.scheduled() {
        if let (Some(wanted), Some(s)) =
            (ScheduleConfig::from_job(job, targets, now)?, &job.schedule)
        {
            scheduled.push((job.name.clone(), wanted, s));
        }
    }
    for chain in catalog.chains.values() {
        if let (Some(wanted), Some(s)) = (
            ScheduleConfig::from_chain(chain, targets, now),
            &chain.schedule,
        ) {
            scheduled.push((chain.name.clone(), wanted, s));
        }
    }
    for (name, mut wanted, schedule) in scheduled {
        if paused.contains(&name) {
            wanted.enabled = false;
        }
        if schedule.finished_by(now) {
            // History, not a change: creating it would fire nothing (or be refused), and
            // deleting one that is there would ask an operator to confirm for no gain.
            current.remove(&name);
            finished.push(name.clone());
            continue;
        }
        match current.remove(&name) {
            None => changes.push(Change::Create {
                name: name.clone(),
                config: Box::new(wanted),
            }),
            Some(have) => {
                // Compared by effect: the start sent at the last sync (the next run then,
                // on the catalog start's phase) is the same schedule as the one due now.
                // Compared, not sent: an update sends the start due now, as AWS
                // refuses one more than five minutes ago.
                let mut compared = wanted.clone();
                if have.start != wanted.start
                    && same_start_effect(schedule, have.start, wanted.start, now)
                {
                    compared.start = have.start;
                }
                let differences = have.differences(&compared);
                if !differences.is_empty() {
                    changes.push(Change::Update {
                        name: name.clone(),
                        config: Box::new(wanted),
                        differences,
                    });
                }
            }
        }
    }
    changes.extend(current.into_keys().map(|name| Change::Delete { name }));
    Ok(Plan {
        group,
        create_group,
        changes,
        finished,
        paused: paused.clone(),
    })
}

/// Whether two start dates (epoch seconds) give `schedule` the same runs from `now` on.
fn same_start_effect(
    schedule: &crate::schedule::Schedule,
    a: Option<i64>,
    b: Option<i64>,
    now: DateTime<Utc>,
) -> bool {
    let with = |start: Option<i64>| {
        let mut s = schedule.clone();
        s.start = start.and_then(|t| DateTime::from_timestamp(t, 0));
        s
    };
    with(a).same_runs_from(&with(b), now)
}

/// CreateSchedule and UpdateSchedule take the same fields, on two builder types.
macro_rules! schedule_request {
    ($builder:expr, $group:expr, $name:expr, $config:expr, $parts:expr) => {
        $builder
            .group_name($group)
            .name($name)
            .schedule_expression(&$config.expression)
            .schedule_expression_timezone(&$config.timezone)
            .set_start_date($parts.start)
            .set_end_date($parts.end)
            .description(&$config.description)
            .state($parts.state)
            .flexible_time_window($parts.window)
            .action_after_completion(ActionAfterCompletion::None)
            .target($parts.target)
    };
}

/// After the writes: a pause or resume that landed between the plan (which read the
/// pauses) and its writes is not undone by them, and neither is the plan's config by it.
///
/// The pauses of the schedules written (`written`: those whose write succeeded) are read
/// again, a hundred to a request. Each one whose pause changed since the plan, or that is
/// paused now, is read back with its record and, while they disagree with the plan's config
/// and the State the record says, written again whole (a pause's own read-modify-write of
/// the State may have carried the config from before the sync). Returns how many schedules
/// it wrote.
pub async fn keep_pauses(
    client: &Client,
    pauses: &crate::store::Pauses,
    catalog: &Catalog,
    plan: &Plan,
    written: &BTreeSet<String>,
) -> Result<usize, TriggerError> {
    let configs: Vec<(&str, &ScheduleConfig)> = plan
        .changes
        .iter()
        .filter_map(|c| match c {
            Change::Create { name, config } | Change::Update { name, config, .. } => {
                Some((name.as_str(), config.as_ref()))
            }
            Change::Delete { .. } => None,
        })
        .filter(|(name, _)| written.contains(*name))
        .collect();
    let now_paused = pauses.of(configs.iter().map(|(name, _)| *name)).await?;
    let mut set = 0;
    for (name, config) in configs {
        if !now_paused.contains_key(name) && !plan.paused.contains(name) {
            continue;
        }
        set += converge_whole(client, pauses, catalog, &plan.group, name, config).await?;
    }
    Ok(set)
}

/// Reads `name`'s schedule and pause record and, while the schedule is not `planned` with
/// the State the record says, writes it so and reads both again; how many writes it made.
async fn converge_whole(
    client: &Client,
    pauses: &crate::store::Pauses,
    catalog: &Catalog,
    group: &str,
    name: &str,
    planned: &ScheduleConfig,
) -> Result<usize, TriggerError> {
    let unpaused = catalog_enabled(catalog, name).unwrap_or(planned.enabled);
    for writes in 0..CONVERGE_ROUNDS {
        let paused = pauses.of([name]).await?.contains_key(name);
        let mut wanted = planned.clone();
        wanted.enabled = unpaused && !paused;
        let stored = client
            .get_schedule()
            .group_name(group)
            .name(name)
            .send()
            .await
            .aws(format!("reading schedule {name}"))?;
        let agrees = ScheduleConfig::from_schedule(&stored)
            .differences(&wanted)
            .is_empty();
        if agrees && pauses.of([name]).await?.contains_key(name) == paused {
            return Ok(writes);
        }
        let change = Change::Update {
            name: name.to_string(),
            config: Box::new(wanted),
            differences: Vec::new(),
        };
        write(client, group, &change).await?;
    }
    Err(TriggerError::Request(format!(
        "schedule {name} or its pause changed {CONVERGE_ROUNDS} times while the sync set it"
    )))
}

/// How often [`keep_pauses`] writes one schedule before it gives up (a pause and a resume
/// each settle in one or two).
const CONVERGE_ROUNDS: usize = 5;

/// The catalog's `enabled` of the job or chain `name`'s schedule.
fn catalog_enabled(catalog: &Catalog, name: &str) -> Option<bool> {
    let job = catalog.job(name).and_then(|j| j.spec.schedule.as_ref());
    let chain = catalog
        .chains
        .get(name)
        .and_then(|c| c.spec.schedule.as_ref());
    job.or(chain).map(|s| s.enabled)
}

/// Performs the plan's writes; returns how many writes it made.
pub async fn apply(client: &Client, plan: &Plan) -> Result<usize, TriggerError> {
    apply_with(client, plan, &Options::default()).await
}

/// Performs the plan's writes at the pace `options` give (the group first, then every
/// create, update and delete, several at once), telling their progress. Every write is
/// tried; when some fail, the error says how many and the first, and a sync run again
/// plans only what is left (it reads the group anew).
pub async fn apply_with(
    client: &Client,
    plan: &Plan,
    options: &Options<'_>,
) -> Result<usize, TriggerError> {
    let applied = apply_changes(client, plan, options).await;
    match applied.error {
        None => Ok(applied.writes),
        Some(e) => Err(e),
    }
}

/// [`apply_with`], then [`keep_pauses`] over every write that succeeded, whether or not
/// some failed: a pause that landed meanwhile is kept even by a sync that stops half-way.
/// The writes' error comes first when both fail.
pub async fn apply_keeping_pauses(
    client: &Client,
    pauses: &crate::store::Pauses,
    catalog: &Catalog,
    plan: &Plan,
    options: &Options<'_>,
) -> Result<usize, TriggerError> {
    let applied = apply_changes(client, plan, options).await;
    let kept = keep_pauses(client, pauses, catalog, plan, &applied.written).await;
    match (applied.error, kept) {
        (Some(e), _) | (None, Err(e)) => Err(e),
        (None, Ok(kept)) => Ok(applied.writes + kept),
    }
}

/// What the writes did.
struct Applied {
    /// Writes made (the group's included).
    writes: usize,
    /// The schedules created or updated.
    written: BTreeSet<String>,
    /// How many failed and the first's error, when some did.
    error: Option<TriggerError>,
}

async fn apply_changes(client: &Client, plan: &Plan, options: &Options<'_>) -> Applied {
    let mut applied = Applied {
        writes: 0,
        written: BTreeSet::new(),
        error: None,
    };
    if plan.create_group {
        let created = client
            .create_schedule_group()
            .name(&plan.group)
            .send()
            .await
            .aws(format!("creating schedule group {}", plan.group));
        if let Err(e) = created {
            applied.error = Some(e.into());
            return applied;
        }
        applied.writes += 1;
    }
    let progress = |done, total| (options.progress)("written", done, total);
    let results = super::paced::each(
        &plan.changes,
        options.pace,
        throttled,
        &progress,
        |change| write(client, &plan.group, change),
    )
    .await;
    let total = results.len();
    let mut failures = 0;
    let mut first = None;
    for (change, result) in plan.changes.iter().zip(results) {
        match (change, result) {
            (_, Err(e)) => {
                failures += 1;
                first.get_or_insert(e);
            }
            (Change::Create { name, .. } | Change::Update { name, .. }, Ok(())) => {
                applied.written.insert(name.clone());
            }
            (Change::Delete { .. }, Ok(())) => {}
        }
    }
    applied.writes += total - failures;
    applied.error = first.map(|e| {
        if total == 1 {
            e
        } else {
            TriggerError::Request(format!(
                "{failures} of {total} schedule writes failed ({} made; `schedules sync` again plans what is left), the first: {e}",
                applied.writes
            ))
        }
    });
    applied
}

/// One planned write.
async fn write(client: &Client, group: &str, change: &Change) -> Result<(), TriggerError> {
    match change {
        Change::Create { name, config } => {
            let parts = Parts::of(config)?;
            schedule_request!(client.create_schedule(), group, name, config, parts)
                .send()
                .await
                .aws(format!("creating schedule {name}"))?;
        }
        Change::Update { name, config, .. } => {
            let parts = Parts::of(config)?;
            schedule_request!(client.update_schedule(), group, name, config, parts)
                .send()
                .await
                .aws(format!("updating schedule {name}"))?;
        }
        Change::Delete { name } => {
            client
                .delete_schedule()
                .group_name(group)
                .name(name)
                .send()
                .await
                .aws(format!("deleting schedule {name}"))?;
        }
    }
    Ok(())
}

/// The SDK shapes of a config (create and update take the same ones).
struct Parts {
    start: Option<SmithyTime>,
    end: Option<SmithyTime>,
    state: ScheduleState,
    window: FlexibleTimeWindow,
    target: SchedulerTarget,
}

impl Parts {
    fn of(config: &ScheduleConfig) -> Result<Parts, TriggerError> {
        let window = match config.flexible_window_minutes {
            0 => FlexibleTimeWindow::builder()
                .mode(FlexibleTimeWindowMode::Off)
                .build()?,
            m => FlexibleTimeWindow::builder()
                .mode(FlexibleTimeWindowMode::Flexible)
                .maximum_window_in_minutes(m as i32)
                .build()?,
        };
        let target = SchedulerTarget::builder()
            .arn(&config.target_arn)
            .role_arn(&config.role_arn)
            .input(&config.input)
            .retry_policy(
                RetryPolicy::builder()
                    .maximum_retry_attempts(config.retry_attempts as i32)
                    .maximum_event_age_in_seconds(config.max_event_age_seconds as i32)
                    .build(),
            )
            .set_dead_letter_config(
                config
                    .dead_letter_arn
                    .as_ref()
                    .map(|arn| DeadLetterConfig::builder().arn(arn).build()),
            )
            .build()?;
        Ok(Parts {
            start: config.start.map(SmithyTime::from_secs),
            end: config.end.map(SmithyTime::from_secs),
            state: if config.enabled {
                ScheduleState::Enabled
            } else {
                ScheduleState::Disabled
            },
            window,
            target,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_jobs_schedule_sends_to_the_host_jobs_queue_and_is_refused_without_one() {
        let catalog = Catalog::parse(
            concat!(
                "[jobs.etl]\nowner = \"t\"\nruns_on = \"host\"\ncommand = { run = \"true\" }\n",
                "schedule = { expression = \"rate(1 hour)\" }\n",
                "[jobs.sync]\nowner = \"t\"\nschedule = { expression = \"rate(1 hour)\" }\n",
            ),
            "test.toml",
        )
        .unwrap();
        let mut targets = SyncTargets {
            queue_arn: "arn:jobs".into(),
            host_queue_arn: Some("arn:host-jobs".into()),
            urgent_queues: false,
            role_arn: "arn:role".into(),
            dead_letter_arn: None,
        };
        let now = Utc::now();
        let config = |job: &str, t: &SyncTargets| {
            ScheduleConfig::from_job(&catalog.jobs[job], t, now).map(|c| c.unwrap().target_arn)
        };
        assert_eq!(config("etl", &targets).unwrap(), "arn:host-jobs");
        assert_eq!(config("sync", &targets).unwrap(), "arn:jobs");
        targets.host_queue_arn = None;
        let refused = config("etl", &targets).unwrap_err().to_string();
        assert!(refused.contains("no host jobs queue"), "{refused}");
        assert_eq!(config("sync", &targets).unwrap(), "arn:jobs");
    }

    #[test]
    fn a_job_of_positive_priority_is_scheduled_onto_the_urgent_queue_when_the_stage_has_one() {
        let catalog = Catalog::parse(
            concat!(
                "[jobs.page]\nowner = \"t\"\npriority = 5\nschedule = { expression = \"rate(1 hour)\" }\n",
                "[jobs.etl]\nowner = \"t\"\nruns_on = \"host\"\npriority = 1\ncommand = { run = \"true\" }\n",
                "schedule = { expression = \"rate(1 hour)\" }\n",
                "[jobs.backfill]\nowner = \"t\"\npriority = -5\nschedule = { expression = \"rate(1 hour)\" }\n",
            ),
            "test.toml",
        )
        .unwrap();
        let mut targets = SyncTargets {
            queue_arn: "arn:jobs".into(),
            host_queue_arn: Some("arn:host-jobs".into()),
            urgent_queues: true,
            role_arn: "arn:role".into(),
            dead_letter_arn: None,
        };
        let now = Utc::now();
        let config = |job: &str, t: &SyncTargets| {
            ScheduleConfig::from_job(&catalog.jobs[job], t, now).map(|c| c.unwrap().target_arn)
        };
        assert_eq!(config("page", &targets).unwrap(), "arn:jobs-urgent");
        assert_eq!(config("etl", &targets).unwrap(), "arn:host-jobs-urgent");
        assert_eq!(config("backfill", &targets).unwrap(), "arn:jobs");
        targets.urgent_queues = false;
        assert_eq!(config("page", &targets).unwrap(), "arn:jobs");
    }
}
