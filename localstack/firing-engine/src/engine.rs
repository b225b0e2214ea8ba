//! The local firing engine: what EventBridge Scheduler does on AWS, for endpoints whose
//! scheduler stores schedules but never fires them (LocalStack).
//!
//! It reads the schedules through the Scheduler API and delivers each due occurrence to its
//! target (SQS, Step Functions, Lambda), filling in the context attributes as AWS does,
//! honouring state, start and end dates, time zone, one-time schedules and their
//! after-completion action, the retry policy and the dead-letter target. Engines running
//! side by side share a claims table so each (schedule, scheduled time) fires once.
//!
//! Two modes: `run` fires in real time; `fast_forward` fires everything due between two
//! instants at once, in time order (tests, the demo).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;

use aws_config::SdkConfig;
use aws_sdk_scheduler::types::{ActionAfterCompletion, ScheduleState};
use aws_sdk_sqs::types::MessageAttributeValue;
use chrono::{DateTime, Utc};
use schedkit::aws::{AwsError, AwsResultExt};
use schedkit::schedule::{Schedule, ScheduleExpression, parse_timezone};
use schedkit::trigger::template::{FireContext, substitute};

use crate::claims::Claims;

/// How an engine runs.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Only these schedule groups (all groups when empty).
    pub groups: Vec<String>,
    /// A claims table shared with other engines (none: this engine fires alone).
    pub claims_table: Option<String>,
    /// Names this engine in claims.
    pub owner: String,
}

/// A schedule as the engine fires it.
#[derive(Debug, Clone)]
pub struct LoadedSchedule {
    pub name: String,
    pub group: String,
    pub arn: String,
    pub enabled: bool,
    pub schedule: Schedule,
    pub target_arn: String,
    pub input: String,
    /// Delivery attempts after the first.
    pub retry_attempts: u32,
    pub max_event_age: Duration,
    pub dead_letter_arn: Option<String>,
    /// `ActionAfterCompletion: DELETE` (one-time schedules).
    pub delete_after_completion: bool,
}

/// What became of one firing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Delivered {
        attempts: u32,
    },
    /// Every attempt failed; the firing went to the schedule's dead-letter queue.
    DeadLettered {
        attempts: u32,
        error: String,
    },
    /// Every attempt failed and there is no dead-letter queue (or it failed too).
    Dropped {
        attempts: u32,
        error: String,
    },
    /// Another engine claimed this firing.
    FiredElsewhere,
}

/// One firing.
#[derive(Debug, Clone)]
pub struct Firing {
    pub schedule: String,
    pub group: String,
    pub scheduled_time: DateTime<Utc>,
    pub target_arn: String,
    pub delivery: Delivery,
}

/// The engine: SDK clients built once, shared by every firing.
pub struct Engine {
    scheduler: aws_sdk_scheduler::Client,
    sqs: aws_sdk_sqs::Client,
    sfn: aws_sdk_sfn::Client,
    lambda: aws_sdk_lambda::Client,
    claims: Option<Claims>,
    options: EngineOptions,
    queue_urls: Mutex<HashMap<String, String>>,
}

impl Engine {
    pub fn new(sdk: &SdkConfig, options: EngineOptions) -> Engine {
        let claims = options
            .claims_table
            .as_ref()
            .map(|t| Claims::new(aws_sdk_dynamodb::Client::new(sdk), t));
        Engine {
            scheduler: aws_sdk_scheduler::Client::new(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
            sfn: aws_sdk_sfn::Client::new(sdk),
            lambda: aws_sdk_lambda::Client::new(sdk),
            claims,
            options,
            queue_urls: Mutex::default(),
        }
    }

    /// Every schedule in the engine's groups, as the Scheduler API describes it.
    pub async fn schedules(&self) -> anyhow::Result<Vec<LoadedSchedule>> {
        let mut out = Vec::new();
        let groups: Vec<Option<&str>> = if self.options.groups.is_empty() {
            vec![None]
        } else {
            self.options
                .groups
                .iter()
                .map(|g| Some(g.as_str()))
                .collect()
        };
        for group in groups {
            let mut pages = self
                .scheduler
                .list_schedules()
                .set_group_name(group.map(str::to_owned))
                .into_paginator()
                .send();
            while let Some(page) = pages.next().await {
                for summary in page.aws("listing schedules")?.schedules {
                    let (name, group) = (
                        summary.name.unwrap_or_default(),
                        summary.group_name.unwrap_or_default(),
                    );
                    let s = match self
                        .scheduler
                        .get_schedule()
                        .group_name(&group)
                        .name(&name)
                        .send()
                        .await
                    {
                        Ok(s) => s,
                        // Deleted between the list and the read (a one-time schedule that fired).
                        Err(e)
                            if e.as_service_error()
                                .is_some_and(|e| e.is_resource_not_found_exception()) =>
                        {
                            continue;
                        }
                        Err(e) => {
                            return Err(AwsError::of(
                                format!("reading schedule {group}/{name}"),
                                &e,
                            )
                            .into());
                        }
                    };
                    match load(s) {
                        Ok(loaded) => out.push(loaded),
                        Err(e) => {
                            tracing::warn!(schedule = name, group, error = %e, "schedule skipped")
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Fires every occurrence in `[from, to)` of every enabled schedule, in time order.
    pub async fn fast_forward(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> anyhow::Result<Vec<Firing>> {
        let schedules = self.schedules().await?;
        self.fire_due(&schedules, from, to, true).await
    }

    /// Fires in real time until `shutdown` resolves, checking every `tick` (and re-reading
    /// the schedules, so changes take effect). Starts from now: nothing past is fired.
    pub async fn run(
        &self,
        tick: Duration,
        shutdown: impl Future<Output = ()>,
    ) -> anyhow::Result<()> {
        tokio::pin!(shutdown);
        let mut watermark = Utc::now();
        loop {
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                _ = tokio::time::sleep(tick) => {}
            }
            let now = Utc::now();
            // A passing failure (the Scheduler API or the claims table unreachable) must
            // not end the engine: say so and go on at the next tick.
            let schedules = match self.schedules().await {
                Ok(s) => s,
                Err(e) => {
                    // Nothing fired yet: the same window is tried again next tick.
                    tracing::warn!(error = %format!("{e:#}"), "could not read the schedules");
                    continue;
                }
            };
            // (watermark, now]: `fire_due` takes [from, to), so shift both by a nanosecond.
            let nano = chrono::Duration::nanoseconds(1);
            match self
                .fire_due(&schedules, watermark + nano, now + nano, false)
                .await
            {
                Ok(firings) => {
                    for f in firings {
                        tracing::info!(schedule = f.schedule, group = f.group, scheduled_time = %f.scheduled_time, delivery = ?f.delivery, "fired");
                    }
                }
                // Some firings may have gone out: the window is not tried again (that
                // could deliver them twice without a claims table).
                Err(e) => tracing::error!(error = %format!("{e:#}"), "firing failed"),
            }
            watermark = now;
        }
    }

    async fn fire_due(
        &self,
        schedules: &[LoadedSchedule],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        fast: bool,
    ) -> anyhow::Result<Vec<Firing>> {
        let mut due: Vec<(DateTime<Utc>, &LoadedSchedule)> = schedules
            .iter()
            .filter(|s| s.enabled)
            .flat_map(|s| {
                s.schedule
                    .between(from, to)
                    .into_iter()
                    .map(move |t| (t, s))
            })
            .collect();
        due.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.arn.cmp(&b.1.arn)));
        let mut firings = Vec::with_capacity(due.len());
        for (time, schedule) in due {
            let firing = self.fire(schedule, time, fast).await?;
            // DELETE after completion: once the schedule has no invocation left (at once
            // for a one-time schedule, after the last one before the end date otherwise).
            if schedule.delete_after_completion
                && firing.delivery != Delivery::FiredElsewhere
                && schedule.schedule.next_after(time).is_none()
            {
                self.delete(schedule).await?;
            }
            firings.push(firing);
        }
        Ok(firings)
    }

    /// One firing: claim it, deliver it with the schedule's retry policy, dead-letter it
    /// when every attempt failed.
    async fn fire(
        &self,
        s: &LoadedSchedule,
        time: DateTime<Utc>,
        fast: bool,
    ) -> anyhow::Result<Firing> {
        let firing = |delivery| Firing {
            schedule: s.name.clone(),
            group: s.group.clone(),
            scheduled_time: time,
            target_arn: s.target_arn.clone(),
            delivery,
        };
        let key = Claims::key(&s.arn, time);
        if let Some(claims) = &self.claims
            && !claims
                .claim(&key, &self.options.owner, claim_lease(s, fast))
                .await?
        {
            return Ok(firing(Delivery::FiredElsewhere));
        }
        let execution_id = uuid::Uuid::new_v4().to_string();
        let mut attempt = 0;
        let delivery = loop {
            attempt += 1;
            let input = substitute(
                &s.input,
                &FireContext {
                    scheduled_time: time,
                    execution_id: execution_id.clone(),
                    schedule_arn: s.arn.clone(),
                    attempt,
                },
            );
            match self.deliver(&s.target_arn, &input).await {
                Ok(()) => break Delivery::Delivered { attempts: attempt },
                Err(error) => {
                    let age = if fast {
                        chrono::Duration::zero()
                    } else {
                        Utc::now() - time
                    };
                    let exhausted = if attempt > s.retry_attempts {
                        Some("MaximumRetryAttemptsExceeded")
                    } else if age.to_std().unwrap_or_default() > s.max_event_age {
                        Some("MaximumEventAgeExceeded")
                    } else {
                        None
                    };
                    if let Some(condition) = exhausted {
                        break self
                            .dead_letter(s, &input, attempt, &error, condition)
                            .await;
                    }
                    // Fast-forward retries at once; real time backs off like the scheduler.
                    tokio::time::sleep(retry_wait(attempt, fast)).await;
                }
            }
        };
        if let Some(claims) = &self.claims {
            let outcome = if matches!(delivery, Delivery::Delivered { .. }) {
                "delivered"
            } else {
                "dead-lettered"
            };
            if !claims.finish(&key, &self.options.owner, outcome).await? {
                tracing::warn!(
                    firing = key,
                    "the claim was taken over while this engine was still delivering"
                );
            }
        }
        Ok(firing(delivery))
    }

    async fn deliver(&self, target_arn: &str, input: &str) -> Result<(), String> {
        let service = target_arn.split(':').nth(2).unwrap_or_default();
        let context = |e: &dyn std::fmt::Display| format!("{target_arn}: {e}");
        match service {
            "sqs" => {
                let url = self.queue_url(target_arn).await?;
                self.sqs
                    .send_message()
                    .queue_url(url)
                    .message_body(input)
                    .send()
                    .await
                    .map_err(|e| context(&schedkit::aws::describe(&e)))?;
            }
            "states" => {
                self.sfn
                    .start_execution()
                    .state_machine_arn(target_arn)
                    .input(input)
                    .send()
                    .await
                    .map_err(|e| context(&schedkit::aws::describe(&e)))?;
            }
            "lambda" => {
                self.lambda
                    .invoke()
                    .function_name(target_arn)
                    .invocation_type(aws_sdk_lambda::types::InvocationType::Event)
                    .payload(aws_sdk_lambda::primitives::Blob::new(input))
                    .send()
                    .await
                    .map_err(|e| context(&schedkit::aws::describe(&e)))?;
            }
            other => {
                return Err(format!(
                    "{target_arn}: targets of service `{other}` are not supported by the local engine"
                ));
            }
        }
        Ok(())
    }

    /// The queue URL of an SQS ARN (`arn:aws:sqs:<region>:<account>:<name>`), cached.
    async fn queue_url(&self, arn: &str) -> Result<String, String> {
        if let Some(url) = self.queue_urls.lock().unwrap().get(arn) {
            return Ok(url.clone());
        }
        let parts: Vec<&str> = arn.split(':').collect();
        let [_, _, "sqs", _, account, name] = parts[..] else {
            return Err(format!("`{arn}` is not an SQS queue ARN"));
        };
        let url = self
            .sqs
            .get_queue_url()
            .queue_name(name)
            .queue_owner_aws_account_id(account)
            .send()
            .await
            .map_err(|e| format!("{arn}: {}", schedkit::aws::describe(&e)))?
            .queue_url
            .unwrap_or_default();
        self.queue_urls
            .lock()
            .unwrap()
            .insert(arn.to_string(), url.clone());
        Ok(url)
    }

    /// Sends an undeliverable firing to the schedule's DLQ, with the attributes
    /// EventBridge Scheduler puts on its dead letters.
    async fn dead_letter(
        &self,
        s: &LoadedSchedule,
        input: &str,
        attempts: u32,
        error: &str,
        condition: &str,
    ) -> Delivery {
        let Some(dlq) = &s.dead_letter_arn else {
            return Delivery::Dropped {
                attempts,
                error: error.to_string(),
            };
        };
        let text = |v: &str| {
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value(v)
                .build()
                .expect("type and value set")
        };
        let sent = match self.queue_url(dlq).await {
            Ok(url) => self
                .sqs
                .send_message()
                .queue_url(url)
                .message_body(input)
                .message_attributes("ERROR_CODE", text("TargetDeliveryFailed"))
                .message_attributes(
                    "ERROR_MESSAGE",
                    text(&error.chars().take(1024).collect::<String>()),
                )
                .message_attributes("EXHAUSTED_RETRY_CONDITION", text(condition))
                .message_attributes("RETRY_ATTEMPTS", text(&(attempts - 1).to_string()))
                .message_attributes("SCHEDULE_ARN", text(&s.arn))
                .message_attributes("TARGET_ARN", text(&s.target_arn))
                .send()
                .await
                .map_err(|e| schedkit::aws::describe(&e)),
            Err(e) => Err(e),
        };
        match sent {
            Ok(_) => Delivery::DeadLettered {
                attempts,
                error: error.to_string(),
            },
            Err(dlq_error) => Delivery::Dropped {
                attempts,
                error: format!("{error}; and the dead-letter queue failed: {dlq_error}"),
            },
        }
    }

    async fn delete(&self, s: &LoadedSchedule) -> anyhow::Result<()> {
        match self
            .scheduler
            .delete_schedule()
            .group_name(&s.group)
            .name(&s.name)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_resource_not_found_exception()) =>
            {
                Ok(())
            }
            Err(e) => {
                Err(AwsError::of(format!("deleting completed schedule {}", s.name), &e).into())
            }
        }
    }
}

/// A Scheduler API schedule in the engine's terms.
fn load(
    s: aws_sdk_scheduler::operation::get_schedule::GetScheduleOutput,
) -> anyhow::Result<LoadedSchedule> {
    let instant = |t: Option<aws_sdk_scheduler::primitives::DateTime>| {
        t.and_then(|t| DateTime::from_timestamp(t.secs(), t.subsec_nanos()))
    };
    let expression: ScheduleExpression =
        s.schedule_expression.clone().unwrap_or_default().parse()?;
    let timezone = parse_timezone(s.schedule_expression_timezone.as_deref().unwrap_or("UTC"))?;
    let mut schedule = Schedule::new(expression, timezone);
    schedule.start = instant(s.start_date);
    schedule.end = instant(s.end_date);
    schedule.created = instant(s.creation_date);
    let target = s.target.context("schedule has no target")?;
    let retry = target.retry_policy.as_ref();
    Ok(LoadedSchedule {
        name: s.name.unwrap_or_default(),
        group: s.group_name.unwrap_or_else(|| "default".into()),
        arn: s.arn.unwrap_or_default(),
        enabled: s.state != Some(ScheduleState::Disabled),
        schedule,
        retry_attempts: retry.and_then(|r| r.maximum_retry_attempts).unwrap_or(185) as u32,
        max_event_age: Duration::from_secs(
            retry
                .and_then(|r| r.maximum_event_age_in_seconds)
                .unwrap_or(86_400) as u64,
        ),
        dead_letter_arn: target.dead_letter_config.and_then(|d| d.arn),
        input: target.input.unwrap_or_default(),
        target_arn: target.arn,
        delete_after_completion: s.action_after_completion == Some(ActionAfterCompletion::Delete),
    })
}

/// How long a firing's claim must hold: every retry the schedule's policy allows (as the
/// engine spaces them), bounded by the maximum event age, plus a margin for the deliveries
/// themselves. Shorter, and another engine could take the firing over mid-retry and
/// deliver it a second time.
fn claim_lease(s: &LoadedSchedule, fast: bool) -> Duration {
    let retries: Duration = (1..=s.retry_attempts)
        .map(|attempt| retry_wait(attempt, fast))
        .sum();
    let bounded = if fast {
        retries
    } else {
        retries.min(s.max_event_age)
    };
    bounded + Duration::from_secs(300)
}

/// The pause after failed attempt `attempt`: none to speak of when fast-forwarding,
/// otherwise doubling from 2 s up to 64 s, like the scheduler's backoff.
fn retry_wait(attempt: u32, fast: bool) -> Duration {
    if fast {
        Duration::from_millis(10)
    } else {
        Duration::from_secs(1 << attempt.min(6))
    }
}
