//! The local firing engine: what EventBridge Scheduler does on AWS, for endpoints whose
//! scheduler stores schedules but never fires them (LocalStack).
//!
//! It reads the schedules through the Scheduler API and delivers each due occurrence to its
//! target, filling in the context attributes as AWS does, honouring state, start and end
//! dates, time zone, flexible time windows, one-time schedules and their after-completion
//! action, the retry policy and the dead-letter target ([`crate::policy`] holds the rules,
//! [`crate::delivery`] the targets).
//!
//! Every firing is delivered on its own: one attempt at a time, a failed one waiting for
//! its retry without holding any other firing back, and one no retry can cure going to the
//! dead-letter queue at once. Engines side by side share a claims table, so each
//! (schedule, scheduled time) fires once, and a watermark in it, so an engine that was
//! down (or failed to reach its claims) catches up on what it missed, within each
//! schedule's maximum event age.
//!
//! Two modes: [`Engine::run`] fires in real time; [`Engine::fast_forward`] fires
//! everything due between two instants at once, retries included, in simulated time
//! (tests, the demo).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use aws_config::SdkConfig;
use aws_sdk_scheduler::types::{ActionAfterCompletion, FlexibleTimeWindowMode, ScheduleState};
use chrono::{DateTime, Utc};
use schedkit::Clock;
use schedkit::aws::{AwsError, AwsResultExt};
use schedkit::dead_letter::SchedulerDeadLetter;
use schedkit::schedule::Schedule;
use schedkit::trigger::stored_schedule;
use schedkit::trigger::template::{FireContext, substitute};
use tokio::task::JoinSet;

use crate::claims::{Claim, Claims};
use crate::delivery::{DeliveryError, Targets};
use crate::policy::{self, Next};

/// How an engine runs.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Only these schedule groups (all groups when empty).
    pub groups: Vec<String>,
    /// A claims table shared with other engines (none: this engine fires alone, and after
    /// a restart it starts from now, having nowhere to keep its watermark).
    pub claims_table: Option<String>,
    /// Names this engine in claims, before the host, the process id and a random part
    /// that the engine adds: two engines are never one owner, not even two containers
    /// whose engines are both pid 1 and given the same name.
    pub owner: String,
    /// The engine's "now" (tests shift it to simulate an engine that was down).
    pub clock: Clock,
    /// Where in its flexible window each firing lands is drawn from this seed (None: a
    /// random one).
    pub seed: Option<u64>,
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
    /// `FlexibleTimeWindow` in minutes; 0 when off.
    pub flexible_window_minutes: u32,
}

/// What became of one firing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Delivered {
        attempts: u32,
    },
    /// The attempts failed (or one failed for good); the firing went to the schedule's
    /// dead-letter queue.
    DeadLettered {
        attempts: u32,
        error: String,
    },
    /// The attempts failed and there is no dead-letter queue (or it failed too).
    Dropped {
        attempts: u32,
        error: String,
    },
    /// Another engine claimed this firing.
    FiredElsewhere,
    /// Missed while no engine ran, and older than the schedule's maximum event age when
    /// one came back: not delivered, as AWS delivers no firing past that age.
    Expired,
}

/// One firing.
#[derive(Debug, Clone)]
pub struct Firing {
    pub schedule: String,
    pub group: String,
    pub scheduled_time: DateTime<Utc>,
    /// When its last attempt was made (simulated time when fast-forwarding); None when
    /// this engine made none.
    pub attempted_at: Option<DateTime<Utc>>,
    pub target_arn: String,
    pub delivery: Delivery,
}

/// The longest a delivery may take: an attempt with no answer by then has failed (and is
/// tried again, as the scheduler's retry policy says). Far below [`CLAIM_LEASE`], so an
/// engine never still delivers a firing whose claim another engine may have taken over.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a claim holds between two attempts: the longest retry wait and a delivery.
/// An engine that dies mid-firing is taken over within this.
const CLAIM_LEASE: Duration = Duration::from_secs(124);

/// How often a delivered firing's claim is marked finished within its attempt before the
/// mark is left to the next ticks (real time) or the run fails (fast-forward): never by
/// delivering it again.
const MARK_TRIES: u32 = 3;

/// At most this many deliveries in flight in real time.
const MAX_IN_FLIGHT: usize = 64;

/// The engine: SDK clients built once, shared by every firing (cheap to clone).
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    scheduler: aws_sdk_scheduler::Client,
    targets: Targets,
    claims: Option<Claims>,
    options: EngineOptions,
    /// The owner of this engine's claims: the options' name, the host, the process, and a
    /// random part.
    owner: String,
    seed: u64,
}

/// A firing on its way: the attempts made so far and when the next is due.
#[derive(Debug, Clone)]
struct Pending {
    schedule: Arc<LoadedSchedule>,
    scheduled: DateTime<Utc>,
    key: String,
    execution_id: String,
    attempts: u32,
    /// When it was first due: its time plus its place in its flexible window. Its age,
    /// which the maximum event age bounds, counts from here.
    released: DateTime<Utc>,
    /// When its next attempt is due.
    due: DateTime<Utc>,
}

/// The result of one step of a firing.
enum Step {
    /// Nothing more to do for it (its claim key, and what became of it).
    Finished(String, Box<Firing>),
    /// Delivered (or dead-lettered), and its claim not yet marked so: the mark (this
    /// outcome) is tried again, the firing never delivered again.
    Unmarked(String, Box<Firing>, &'static str),
    /// Failed passingly: try again at its `due`.
    Again(Pending),
    /// Another engine holds it under a live lease: look again later.
    Held(Pending),
}

impl Engine {
    pub fn new(sdk: &SdkConfig, options: EngineOptions) -> Engine {
        let claims = options
            .claims_table
            .as_ref()
            .map(|t| Claims::new(aws_sdk_dynamodb::Client::new(sdk), t));
        let seed = options
            .seed
            .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0);
        let owner = format!(
            "{}/{}/{}/{}",
            options.owner,
            host(),
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        Engine {
            inner: Arc::new(Inner {
                scheduler: aws_sdk_scheduler::Client::new(sdk),
                targets: Targets::new(sdk),
                claims,
                options,
                owner,
                seed,
            }),
        }
    }

    /// The owner this engine's claims name: its options' name, host, process and a random
    /// part.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// Every schedule in the engine's groups, as the Scheduler API describes it.
    pub async fn schedules(&self) -> anyhow::Result<Vec<LoadedSchedule>> {
        let inner = &self.inner;
        let mut out = Vec::new();
        let groups: Vec<Option<&str>> = if inner.options.groups.is_empty() {
            vec![None]
        } else {
            inner
                .options
                .groups
                .iter()
                .map(|g| Some(g.as_str()))
                .collect()
        };
        for group in groups {
            let mut pages = inner
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
                    // None: deleted between the list and the read (a one-time
                    // schedule that fired).
                    let Some(s) = stored_schedule(&inner.scheduler, &group, &name).await? else {
                        continue;
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

    /// Fires every occurrence in `[from, to)` of every enabled schedule, in simulated time:
    /// each at its time (plus its place in its flexible window), a failed attempt retried
    /// after the scheduler's backoff while the others go on, as the clock would have it.
    pub async fn fast_forward(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> anyhow::Result<Vec<Firing>> {
        let schedules: Vec<Arc<LoadedSchedule>> =
            self.schedules().await?.into_iter().map(Arc::new).collect();
        let mut queue: BTreeMap<(DateTime<Utc>, String, u64), Pending> = BTreeMap::new();
        let mut seq = 0u64;
        for s in schedules.iter().filter(|s| s.enabled) {
            for t in s.schedule.between(from, to) {
                let p = self.inner.pending(s, t);
                queue.insert((p.due, s.arn.clone(), seq), p);
                seq += 1;
            }
        }
        let mut firings = Vec::with_capacity(queue.len());
        while let Some(((due, arn, _), p)) = queue.pop_first() {
            match self.inner.step(p, due).await? {
                Step::Finished(_, f) => firings.push(*f),
                // Delivered: failing the run now (rather than delivering it again) leaves the
                // claim to lapse; its firing is not lost.
                Step::Unmarked(key, f, _) => anyhow::bail!(
                    "firing {key} was {:?}, and its claim could not be marked so; another engine may deliver it again once the claim lapses",
                    f.delivery
                ),
                Step::Again(p) => {
                    queue.insert((p.due, arn, seq), p);
                    seq += 1;
                }
                // Another engine runs the same span and holds it: it is theirs.
                Step::Held(p) => firings.push(p.firing(Delivery::FiredElsewhere, None)),
            }
        }
        Ok(firings)
    }

    /// Fires in real time until `shutdown` resolves, looking for due firings every `tick`
    /// (and re-reading the schedules, so changes take effect). With a claims table it
    /// starts from the watermark the engines recorded there, so firings missed while no
    /// engine ran are delivered late (within their maximum event age), as AWS delivers a
    /// late firing; without one it starts from now. Returns promptly on `shutdown`: a
    /// delivery in flight is abandoned, and its claim lapses to the next engine.
    pub async fn run(
        &self,
        tick: Duration,
        shutdown: impl Future<Output = ()>,
    ) -> anyhow::Result<()> {
        tokio::pin!(shutdown);
        let mut state = RealTime::new(&self.inner);
        let mut ticks = tokio::time::interval(tick);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut running: JoinSet<(String, anyhow::Result<Step>)> = JoinSet::new();
        loop {
            tokio::select! {
                biased;
                _ = &mut shutdown => {
                    running.abort_all();
                    return Ok(());
                }
                Some(joined) = running.join_next(), if !running.is_empty() => {
                    match joined {
                        Ok((_, Ok(step))) => state.settle(step),
                        // The claims table or the scheduler failed us before the delivery:
                        // the next look tries the firing again (the watermark waits for it).
                        Ok((key, Err(e))) => {
                            tracing::warn!(firing = key, error = %format!("{e:#}"), "a firing will be tried again");
                            state.on_the_way.remove(&key);
                        }
                        Err(e) if e.is_cancelled() => {}
                        Err(e) => tracing::error!(error = %e, "a delivery task failed"),
                    }
                    continue;
                }
                _ = ticks.tick() => {}
            }
            let now = self.inner.options.clock.now();
            // Where to catch up from: the engines' watermark, read once it can be.
            if !state.start(&self.inner, now).await {
                continue;
            }
            state.mark(&self.inner).await;
            let seen = match self.schedules().await {
                Ok(s) => {
                    state.schedules = s.into_iter().map(Arc::new).collect();
                    true
                }
                // Keep firing what was read last; the watermark stays where it is, as a
                // schedule this look did not see may have firings due.
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "could not read the schedules");
                    false
                }
            };
            for p in state.due(
                &self.inner,
                now,
                MAX_IN_FLIGHT.saturating_sub(running.len()),
            ) {
                let inner = Arc::clone(&self.inner);
                running.spawn(async move {
                    let now = inner.options.clock.now();
                    let key = p.key.clone();
                    (key, inner.step(p, now).await)
                });
            }
            if seen {
                state.advance(&self.inner, now).await;
            }
        }
    }
}

/// What the real-time loop keeps between ticks.
struct RealTime {
    /// Every firing scheduled before it is finished (by this engine or another). None
    /// until it is known: read from the claims table (where the engines record it) once
    /// the table answers, or this engine's start when none is recorded (or there is no
    /// table).
    watermark: Option<DateTime<Utc>>,
    /// When this engine started: where it fires from when no engine recorded a watermark.
    started: DateTime<Utc>,
    /// What the engines share the watermark under: the groups watched.
    scope: String,
    schedules: Vec<Arc<LoadedSchedule>>,
    /// Firings finished at or after the watermark, by key (the watermark can lag behind
    /// an earlier firing still on its way), with their scheduled time.
    done: HashMap<String, DateTime<Utc>>,
    /// Firings on their way in this engine (attempt in flight, waiting to retry, or
    /// delivered and their claim not yet marked).
    on_the_way: HashMap<String, DateTime<Utc>>,
    /// Firings waiting for their next attempt.
    waiting: Vec<Pending>,
    /// Delivered (or dead-lettered) firings whose claims are still to be marked, with the
    /// outcome to mark.
    unmarked: Vec<(String, Box<Firing>, &'static str)>,
    /// The earliest firing seen unfinished in the last look (held elsewhere, not due).
    low: Option<DateTime<Utc>>,
}

impl RealTime {
    fn new(inner: &Inner) -> RealTime {
        let mut groups = inner.options.groups.clone();
        groups.sort();
        let scope = if groups.is_empty() {
            "*".to_string()
        } else {
            groups.join(",")
        };
        RealTime {
            watermark: None,
            started: inner.options.clock.now(),
            scope,
            schedules: Vec::new(),
            done: HashMap::new(),
            on_the_way: HashMap::new(),
            waiting: Vec::new(),
            unmarked: Vec::new(),
            low: None,
        }
    }

    /// Whether the watermark is known, reading it if not: the engines' recorded one (no
    /// later than now), this engine's start when none was recorded or there is no claims
    /// table. A failed read leaves it unknown, to be read again at the next tick: starting
    /// from now would throw the catch-up away.
    async fn start(&mut self, inner: &Inner, now: DateTime<Utc>) -> bool {
        if self.watermark.is_some() {
            return true;
        }
        let recorded = match &inner.claims {
            Some(claims) => match claims.watermark(&self.scope).await {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "the watermark cannot be read yet: firing nothing until it can");
                    return false;
                }
            },
            None => None,
        };
        let watermark = recorded.map_or(self.started, |w| w.min(now));
        if watermark < now {
            tracing::info!(from = %watermark, "catching up on firings missed while no engine ran");
        }
        self.watermark = Some(watermark);
        true
    }

    /// Marks the claims of delivered firings that could not be marked yet.
    async fn mark(&mut self, inner: &Inner) {
        let Some(claims) = &inner.claims else {
            return;
        };
        for (key, firing, outcome) in std::mem::take(&mut self.unmarked) {
            match claims.finish(&key, &inner.owner, outcome).await {
                Ok(marked) => {
                    if !marked {
                        tracing::warn!(
                            firing = key,
                            "the claim was taken over before it could be marked"
                        );
                    }
                    self.settle(Step::Finished(key, firing));
                }
                Err(e) => {
                    tracing::warn!(firing = key, error = %format!("{e:#}"), "the claim of a delivered firing is still not marked");
                    self.unmarked.push((key, firing, outcome));
                }
            }
        }
    }

    /// The firings to attempt now, at most `room` of them: new ones due since the
    /// watermark, retries whose wait is over, and held ones to claim again.
    fn due(&mut self, inner: &Inner, now: DateTime<Utc>, room: usize) -> Vec<Pending> {
        let mut out = Vec::new();
        let mut low: Option<DateTime<Utc>> = None;
        let mut keep_low = |t: DateTime<Utc>| low = Some(low.map_or(t, |l| l.min(t)));
        let (ready, later): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|p| p.due <= now);
        self.waiting = later;
        for p in ready {
            if out.len() < room {
                out.push(p);
            } else {
                self.waiting.push(p);
            }
        }
        let mut expired: HashMap<&str, usize> = HashMap::new();
        for s in self.schedules.iter().filter(|s| s.enabled) {
            let window = chrono::Duration::minutes(i64::from(s.flexible_window_minutes));
            let max_age = chrono::Duration::from_std(s.max_event_age).unwrap_or_default();
            let nano = chrono::Duration::nanoseconds(1);
            let watermark = self.watermark.unwrap_or(now);
            for t in s.schedule.between(watermark - window, now + nano) {
                let key = Claims::key(&s.arn, t);
                if self.done.contains_key(&key) || self.on_the_way.contains_key(&key) {
                    continue;
                }
                let p = inner.pending(s, t);
                if p.due < watermark {
                    continue; // finished before the watermark moved past it
                }
                if p.released + max_age < now {
                    *expired.entry(s.name.as_str()).or_default() += 1;
                    self.done.insert(key, t);
                    continue;
                }
                if p.due > now || out.len() >= room {
                    keep_low(t);
                    continue;
                }
                out.push(p);
            }
        }
        for (schedule, n) in expired {
            tracing::warn!(
                schedule,
                firings = n,
                "missed firings older than the schedule's maximum event age: not delivered"
            );
        }
        for p in &out {
            self.on_the_way.insert(p.key.clone(), p.scheduled);
        }
        for p in &self.waiting {
            keep_low(p.scheduled);
        }
        self.low = low;
        out
    }

    /// Takes in the result of one step.
    fn settle(&mut self, step: Step) {
        match step {
            Step::Finished(key, f) => {
                tracing::info!(schedule = f.schedule, group = f.group, scheduled_time = %f.scheduled_time, delivery = ?f.delivery, "fired");
                self.on_the_way.remove(&key);
                self.done.insert(key, f.scheduled_time);
            }
            Step::Unmarked(key, f, outcome) => {
                self.on_the_way.insert(key.clone(), f.scheduled_time);
                self.unmarked.push((key, f, outcome));
            }
            Step::Again(p) => {
                self.on_the_way.insert(p.key.clone(), p.scheduled);
                self.waiting.push(p);
            }
            // Not ours: the next look claims it again (it wins once the lease lapses).
            Step::Held(p) => {
                self.on_the_way.remove(&p.key);
            }
        }
    }

    /// Moves the watermark up to the earliest firing not finished (or to now), and records
    /// it for the other engines and the next start.
    async fn advance(&mut self, inner: &Inner, now: DateTime<Utc>) {
        let mut next = now;
        for t in self.on_the_way.values().copied().chain(self.low) {
            next = next.min(t);
        }
        if self.watermark.is_some_and(|w| next <= w) {
            return;
        }
        self.watermark = Some(next);
        // Keep what a flexible window (up to a day) could still bring back into view.
        let horizon = next - chrono::Duration::days(1);
        self.done.retain(|_, t| *t >= horizon);
        if let Some(claims) = &inner.claims
            && let Err(e) = claims.advance_watermark(&self.scope, next).await
        {
            tracing::warn!(error = %format!("{e:#}"), "could not record the watermark");
        }
    }
}

impl Inner {
    fn pending(&self, s: &Arc<LoadedSchedule>, t: DateTime<Utc>) -> Pending {
        let offset = policy::window_offset(self.seed, &s.arn, t, s.flexible_window_minutes);
        let released = t + chrono::Duration::from_std(offset).unwrap_or_default();
        Pending {
            schedule: Arc::clone(s),
            scheduled: t,
            key: Claims::key(&s.arn, t),
            execution_id: uuid::Uuid::new_v4().to_string(),
            attempts: 0,
            released,
            due: released,
        }
    }

    /// One attempt of a firing at `now` (simulated when `fast`): claimed first (or its
    /// claim renewed), then delivered; a failure is retried later or dead-lettered.
    /// `now` is simulated time when fast-forwarding: it decides the retry and the age.
    async fn step(&self, mut p: Pending, now: DateTime<Utc>) -> anyhow::Result<Step> {
        let owner = &self.owner;
        if let Some(claims) = &self.claims {
            let wall = self.options.clock.now();
            if p.attempts == 0 {
                match claims.claim(&p.key, owner, CLAIM_LEASE, wall).await? {
                    Claim::Won => {}
                    Claim::Finished => {
                        return Ok(p.finished(Delivery::FiredElsewhere, None));
                    }
                    Claim::Held => return Ok(Step::Held(p)),
                }
            } else if !claims.renew(&p.key, owner, CLAIM_LEASE, wall).await? {
                tracing::warn!(
                    firing = p.key,
                    "the claim was taken over between two attempts"
                );
                return Ok(p.finished(Delivery::FiredElsewhere, None));
            }
        }
        p.attempts += 1;
        let s = Arc::clone(&p.schedule);
        let input = substitute(
            &s.input,
            &FireContext {
                scheduled_time: p.scheduled,
                execution_id: p.execution_id.clone(),
                schedule_arn: s.arn.clone(),
                attempt: p.attempts,
            },
        );
        let delivered = match tokio::time::timeout(
            DELIVERY_TIMEOUT,
            self.targets.deliver(&s.target_arn, &input),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(DeliveryError {
                code: None,
                message: format!(
                    "{}: no answer within {} s",
                    s.target_arn,
                    DELIVERY_TIMEOUT.as_secs()
                ),
                permanent: false,
            }),
        };
        let delivery = match delivered {
            Ok(()) => Delivery::Delivered {
                attempts: p.attempts,
            },
            Err(error) => match policy::after_failure(
                p.attempts,
                error.permanent,
                p.released,
                now,
                s.retry_attempts,
                s.max_event_age,
            ) {
                Next::Retry(wait) => {
                    tracing::info!(
                        firing = p.key,
                        attempt = p.attempts,
                        error = error.message,
                        "delivery failed, will retry"
                    );
                    p.due = now + chrono::Duration::from_std(wait).unwrap_or_default();
                    return Ok(Step::Again(p));
                }
                Next::DeadLetter(condition) => {
                    self.dead_letter(&s, &input, p.attempts, &error, condition)
                        .await
                }
            },
        };
        let mut unmarked = None;
        if let Some(claims) = &self.claims {
            let outcome = if matches!(delivery, Delivery::Delivered { .. }) {
                "delivered"
            } else {
                "dead-lettered"
            };
            let mut marked = claims.finish(&p.key, owner, outcome).await;
            for try_again in 1..MARK_TRIES {
                if marked.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200 << try_again)).await;
                marked = claims.finish(&p.key, owner, outcome).await;
            }
            match marked {
                Ok(true) => {}
                Ok(false) => tracing::warn!(
                    firing = p.key,
                    "the claim was taken over while this engine was still delivering"
                ),
                Err(e) => {
                    tracing::warn!(firing = p.key, error = %format!("{e:#}"), "delivered; its claim not yet marked");
                    unmarked = Some(outcome);
                }
            }
        }
        // DELETE after completion: once the schedule has no invocation left (at once for a
        // one-time schedule, after the last one before the end date otherwise).
        if s.delete_after_completion && s.schedule.next_after(p.scheduled).is_none() {
            self.delete(&s).await?;
        }
        Ok(match unmarked {
            Some(outcome) => Step::Unmarked(
                p.key.clone(),
                Box::new(p.firing(delivery, Some(now))),
                outcome,
            ),
            None => p.finished(delivery, Some(now)),
        })
    }

    async fn dead_letter(
        &self,
        s: &LoadedSchedule,
        input: &str,
        attempts: u32,
        error: &DeliveryError,
        condition: Option<&'static str>,
    ) -> Delivery {
        let Some(dlq) = &s.dead_letter_arn else {
            return Delivery::Dropped {
                attempts,
                error: error.message.clone(),
            };
        };
        let letter = SchedulerDeadLetter {
            input,
            error_code: error.code.as_deref(),
            error_message: &error.message,
            condition,
            retries: attempts - 1,
            schedule_arn: &s.arn,
            target_arn: &s.target_arn,
        };
        match self.targets.dead_letter(dlq, &letter).await {
            Ok(()) => Delivery::DeadLettered {
                attempts,
                error: error.message.clone(),
            },
            Err(dlq_error) => Delivery::Dropped {
                attempts,
                error: format!(
                    "{}; and the dead-letter queue failed: {dlq_error}",
                    error.message
                ),
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

impl Pending {
    fn finished(&self, delivery: Delivery, attempted_at: Option<DateTime<Utc>>) -> Step {
        Step::Finished(
            self.key.clone(),
            Box::new(self.firing(delivery, attempted_at)),
        )
    }

    fn firing(&self, delivery: Delivery, attempted_at: Option<DateTime<Utc>>) -> Firing {
        Firing {
            schedule: self.schedule.name.clone(),
            group: self.schedule.group.clone(),
            scheduled_time: self.scheduled,
            attempted_at,
            target_arn: self.schedule.target_arn.clone(),
            delivery,
        }
    }
}

/// A Scheduler API schedule in the engine's terms.
fn load(
    s: aws_sdk_scheduler::operation::get_schedule::GetScheduleOutput,
) -> anyhow::Result<LoadedSchedule> {
    let schedule = Schedule::from_stored(&s)?;
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
        flexible_window_minutes: s
            .flexible_time_window
            .filter(|w| w.mode == FlexibleTimeWindowMode::Flexible)
            .and_then(|w| w.maximum_window_in_minutes)
            .unwrap_or(0) as u32,
    })
}

/// This machine's name (`/proc/sys/kernel/hostname`, else `HOSTNAME`), for claim owners.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into())
}
