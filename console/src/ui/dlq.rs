//! Dead letters: filtered by job, reason and age (read, never consumed); one letter with
//! its body and record; redrive and purge of what the filter selects.

use axum::extract::{Query, State};
use chrono::Utc;
use maud::html;
use schedkit::ops::dlq::{self, HeldLetter};
use schedkit::ops::executions::Records;
use serde::Deserialize;

use super::html::{self, action_link, run_link};
use super::page::{Page, PageError};
use super::state::Shared;
use crate::cli::dlq_cmd::{self, SelectArgs};

/// The reasons a letter can carry: the worker's, and `redrive-policy` (SQS moved it, the
/// worker never decided).
pub fn reasons() -> impl Iterator<Item = &'static str> {
    schedkit::dead_letter::DeadLetterReason::ALL
        .iter()
        .map(|r| r.as_str())
        .chain([schedkit::dead_letter::REDRIVE_POLICY])
}

/// The filters, as the form (or a confirmation) sends them; empty fields are no filter.
#[derive(Debug, Deserialize, Default, Clone)]
pub struct Filters {
    #[serde(default)]
    pub job: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub older_than: String,
}

impl Filters {
    /// The command's selection flags for these filters (and these message ids, when a
    /// confirmation pinned them).
    pub fn select_args(&self, message_ids: Vec<String>) -> SelectArgs {
        let one = |s: &str| {
            (!s.trim().is_empty())
                .then(|| s.trim().to_string())
                .into_iter()
                .collect::<Vec<_>>()
        };
        SelectArgs {
            jobs: one(&self.job),
            keys: one(&self.key),
            message_ids,
            reasons: one(&self.reason),
            older_than: one(&self.older_than).pop(),
            newer_than: None,
            yes: true,
        }
    }

    /// As query pairs, for links that keep the filter.
    pub fn pairs(&self) -> Vec<(&'static str, &str)> {
        [
            ("job", self.job.as_str()),
            ("reason", self.reason.as_str()),
            ("key", self.key.as_str()),
            ("older_than", self.older_than.as_str()),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect()
    }
}

/// Letters a page reads at most: each is held while the page is made, bodies included.
pub const MOST_LETTERS: usize = 1000;

/// What a look at the DLQ found.
pub struct Looked {
    /// The letters the filters select, oldest first.
    pub letters: Vec<HeldLetter>,
    /// Letters read (selected or not).
    pub read: usize,
    /// Whether the look stopped at [`MOST_LETTERS`]: more letters may wait unread.
    pub stopped: bool,
}

/// The DLQ's letters (at most [`MOST_LETTERS`]) and those the filters select. The look
/// runs as a task of its own: a browser that goes away mid-look does not stop it before
/// it has made every letter it held visible again.
pub async fn selected(ui: &Shared, f: &Filters) -> Result<Looked, PageError> {
    let selection = f
        .select_args(Vec::new())
        .selection()
        .map_err(|e| PageError::bad(format!("{e:#}")))?;
    let (sdk, url) = (ui.sdk.clone(), ui.stage.dlq_url.clone());
    let (all, stopped) =
        tokio::spawn(async move { dlq::peek_at_most(&sdk, &url, MOST_LETTERS).await })
            .await
            .map_err(|e| PageError::from(anyhow::anyhow!("reading the DLQ stopped: {e}")))??;
    let read = all.len();
    let now = Utc::now();
    Ok(Looked {
        letters: all
            .into_iter()
            .filter(|d| selection.matches(d, now))
            .collect(),
        read,
        stopped,
    })
}

pub async fn list(State(ui): State<Shared>, Query(f): Query<Filters>) -> Page {
    let Looked {
        letters,
        read: total,
        stopped,
    } = selected(&ui, &f).await?;
    let now = Utc::now();
    let jobs: Vec<&String> = ui.catalog.jobs.keys().collect();
    let filtered = !f.pairs().is_empty();
    let body = html! {
        form.filters method="get" action="/dlq" {
            label { "Job " select name="job" {
                option value="" { "any" }
                @for n in &jobs { option value=(n) selected[f.job == **n] { (n) } }
            } }
            label { "Reason " select name="reason" {
                option value="" { "any" }
                @for r in reasons() { option value=(r) selected[f.reason == r] { (r) } }
            } }
            label { "Older than " input type="text" name="older_than" value=(f.older_than) placeholder="15m, 2h, 1d" size="8"; }
            @if !f.key.is_empty() { input type="hidden" name="key" value=(f.key); }
            button type="submit" { "Filter" }
        }
        p.count { (letters.len()) " of " (total) " dead letters " @if filtered { "match" } @else { "in the DLQ" } "." }
        @if stopped {
            p.note role="note" { "This page reads at most " (MOST_LETTERS) " letters and stopped there: more wait unread. Redrive or purge these, narrow the filter, or use "
                code { "schedkit dlq list" } " for all of them." }
        }
        @if !letters.is_empty() {
            p.actions {
                (action_link(&format!("Redrive these {}", letters.len()), "redrive", &f.pairs()))
                (action_link(&format!("Purge these {}", letters.len()), "purge", &f.pairs()))
            }
            table {
                thead { tr { th { "Id" } th { "Job" } th { "Run" } th { "Reason" } th { "Attempts" } th { "Age" } th { "Error" } } }
                tbody { @for d in &letters {
                    tr {
                        td { a href=(html::href("/dlq/letter", &[("id", &d.message_id)])) { code { (d.message_id.chars().take(8).collect::<String>()) } } }
                        td { (d.job.as_deref().unwrap_or("–")) }
                        td { @match &d.key { Some(k) => (run_link(k)), None => "–" } }
                        td { (d.reason.as_deref().unwrap_or(schedkit::dead_letter::REDRIVE_POLICY)) }
                        td.num { (d.attempts.map(|a| a.to_string()).unwrap_or_else(|| "–".into())) }
                        td { (dlq_cmd::age(d.age(now))) }
                        td { (d.error.as_deref().map(|e| html::clip(e, 80)).unwrap_or_default()) }
                    }
                } }
            }
        }
    };
    Ok(html::page(&ui.frame("Dead letters", "/dlq"), body))
}

#[derive(Debug, Deserialize)]
pub struct IdQuery {
    id: String,
}

pub async fn one(State(ui): State<Shared>, Query(q): Query<IdQuery>) -> Page {
    let letters = selected(&ui, &Filters::default()).await?.letters;
    let d = letters
        .iter()
        .find(|d| d.message_id == q.id)
        .ok_or_else(|| {
            PageError::not_found(format!(
                "no dead letter `{}` (redriven or purged since?)",
                q.id
            ))
        })?;
    let record = match &d.key {
        Some(k) => Records::new(&ui.sdk, &ui.stage.table).get(k).await?,
        None => None,
    };
    let title = format!(
        "Dead letter {}",
        d.message_id.chars().take(8).collect::<String>()
    );
    let body = html! {
        dl.facts {
            dt { "Message id" } dd { code { (d.message_id) } }
            dt { "Reason" } dd { (d.reason.as_deref().unwrap_or("redrive-policy (the worker never decided)")) }
            dt { "Error" } dd.error { (d.error.as_deref().unwrap_or("–")) }
            dt { "Job" } dd { (d.job.as_deref().unwrap_or("–")) }
            dt { "Run" } dd { @match &d.key { Some(k) => (run_link(k)), None => "–" } }
            dt { "Attempts" } dd { (d.attempts.map(|a| a.to_string()).unwrap_or_else(|| "–".into())) }
            dt { "Failed at" } dd { (d.failed_at.as_deref().unwrap_or("–")) }
            dt { "Dead-lettered at" } dd { (d.dead_lettered_at.to_rfc3339()) }
            @if let Some(r) = &record { dt { "Record" } dd { (html::status(r.status)) " after " (r.attempt) " attempt(s)" } }
        }
        p.actions {
            (action_link("Redrive this letter", "redrive", &[("message_id", &d.message_id)]))
            (action_link("Purge this letter", "purge", &[("message_id", &d.message_id)]))
        }
        h2 { "Body" }
        pre { (html::pretty_json(&d.body)) }
    };
    Ok(html::page(&ui.frame(&title, "/dlq"), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_offers_every_reason_a_letter_can_carry() {
        let offered: Vec<&str> = reasons().collect();
        for reason in [
            "limit-wait",
            "permanent-error",
            "redrive-policy",
            "unconfigured",
        ] {
            assert!(
                offered.contains(&reason),
                "{reason} missing from {offered:?}"
            );
        }
        assert_eq!(offered.len(), 10);
    }
}
