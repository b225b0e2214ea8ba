//! Executions: the records, filtered and paged as `executions list` pages them; one run
//! whole (attempts, errors, input, result, lease, trace id).

use axum::extract::{Query, State};
use maud::html;
use schedkit::Status;
use schedkit::ops::executions::{Filter, Records};
use serde::Deserialize;

use super::html::{self, action_link, job_link, run_link};
use super::page::{Page, PageError};
use super::state::Shared;
use crate::cli::parse_instant;

/// Records per page.
const PAGE_SIZE: i32 = 50;

/// The filters, as the form sends them (an empty field is no filter).
#[derive(Debug, Deserialize, Default)]
pub struct ListQuery {
    #[serde(default)]
    job: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    since: String,
    #[serde(default)]
    page: String,
}

const STATUSES: [Status; 8] = [
    Status::Registered,
    Status::Running,
    Status::Retrying,
    Status::Done,
    Status::Failed,
    Status::Skipped,
    Status::Paused,
    Status::Cancelled,
];

pub async fn list(State(ui): State<Shared>, Query(q): Query<ListQuery>) -> Page {
    let some = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_string());
    let status = match some(&q.status) {
        Some(s) => Some(
            STATUSES
                .into_iter()
                .find(|st| st.to_string().eq_ignore_ascii_case(&s))
                .ok_or_else(|| PageError::bad(format!("`{s}` is not a status")))?,
        ),
        None => None,
    };
    let since = some(&q.since)
        .map(|s| parse_instant(&s).map_err(PageError::bad))
        .transpose()?;
    let filter = Filter {
        job: some(&q.job),
        status,
        since,
        until: None,
        limit: PAGE_SIZE,
        page: some(&q.page),
        ..Filter::default()
    };
    let (records, next) = Records::new(&ui.sdk, &ui.stage.table)
        .list(&filter)
        .await
        .map_err(|e| match e {
            schedkit::ops::OpsError::BadPageToken => {
                PageError::bad("that page token is not one this page made")
            }
            e => e.into(),
        })?;
    let names: Vec<&String> = ui
        .catalog
        .jobs
        .keys()
        .chain(ui.catalog.chains.keys())
        .collect();
    let body = html! {
        form.filters method="get" action="/executions" {
            label { "Job " select name="job" {
                option value="" { "any" }
                @for n in &names { option value=(n) selected[q.job == **n] { (n) } }
            } }
            label { "Status " select name="status" {
                option value="" { "any" }
                @for s in STATUSES { option value=(s.to_string()) selected[q.status.eq_ignore_ascii_case(&s.to_string())] { (s.to_string()) } }
            } }
            label { "Since " input type="text" name="since" value=(q.since) placeholder="2026-12-01T00:00:00Z or now"; }
            button type="submit" { "Filter" }
        }
        @if records.is_empty() { p { "No execution matches." } }
        @else {
            table {
                thead { tr { th { "Run" } th { "Job" } th { "Scheduled for" } th { "Status" } th { "Attempts" } th { "Took" } th { "Last error" } } }
                tbody { @for r in &records {
                    tr {
                        td { (run_link(&r.execution_key)) }
                        td { (job_link(&r.job)) }
                        td { (r.scheduled_for) }
                        td { (html::status(r.status)) }
                        td.num { (r.attempt) }
                        td.num { (r.duration_ms.map(html::duration_ms).unwrap_or_else(|| "–".into())) }
                        td { (r.last_error.as_deref().map(|e| html::clip(e, 80)).unwrap_or_default()) }
                    }
                } }
            }
        }
        @if let Some(token) = &next {
            p { a.button rel="next" href=(html::href("/executions", &[("job", &q.job), ("status", &q.status), ("since", &q.since), ("page", token)])) { "Next page" } }
        }
    };
    Ok(html::page(&ui.frame("Executions", "/executions"), body))
}

#[derive(Debug, Deserialize)]
pub struct KeyQuery {
    pub key: String,
}

pub async fn one(State(ui): State<Shared>, Query(q): Query<KeyQuery>) -> Page {
    let record = Records::new(&ui.sdk, &ui.stage.table)
        .get(&q.key)
        .await?
        .ok_or_else(|| {
            PageError::not_found(format!("no execution `{}` in {}", q.key, ui.stage.table))
        })?;
    let trace_id = schedkit::telemetry::trace_ids::of_record(&record);
    let now = chrono::Utc::now().timestamp_millis();
    let lease = match (&record.owner, record.lease_expires_at) {
        (Some(o), Some(t)) if t > now && record.status == Status::Running => {
            format!("held by {o}, {} s left", (t - now) / 1000)
        }
        (Some(o), Some(_)) => format!("lapsed or released (last owner {o})"),
        (Some(o), None) => format!("released (last owner {o})"),
        _ => "–".into(),
    };
    let is_chain = ui.catalog.chain(&record.job).is_some();
    let cancellable = matches!(
        record.status,
        Status::Registered | Status::Running | Status::Retrying | Status::Failed
    ) && !is_chain;
    let title = format!("Run {}", record.execution_key);
    let body = html! {
        dl.facts {
            dt { "Job" } dd { (job_link(&record.job)) }
            dt { "Status" } dd { (html::status(record.status)) }
            dt { "Scheduled for" } dd { (record.scheduled_for) }
            dt { "Attempts" } dd { @if record.status == Status::Failed { (record.attempt) " in all; a redrive starts a fresh round" } @else { (record.round_attempt()) " in this round, " (record.attempt) " in all" } }
            dt { "Lease" } dd { (lease) }
            dt { "Trace id" } dd { code { (trace_id) } }
            dt { "Created" } dd { (record.created_at) }
            dt { "Started" } dd { (record.started_at.as_deref().unwrap_or("–")) }
            dt { "Finished" } dd { (record.finished_at.as_deref().unwrap_or("–")) }
            dt { "Took" } dd { (record.duration_ms.map(html::duration_ms).unwrap_or_else(|| "–".into())) }
            @if let Some(e) = &record.last_error { dt { "Last error" } dd.error { (e) } }
            @if let Some(c) = &record.cancelled { dt { "Cancelled" } dd { "by " (c.by) " at " (c.at) ": " (c.reason) } }
            @if let Some(s) = &record.skipped { dt { "Skipped" } dd { "by " (s.by) " at " (s.at) ": " (s.reason) } }
        }
        p.actions {
            @if is_chain { a.button href=(html::href("/chain", &[("key", &record.execution_key)])) { "Its chain picture" } }
            @if cancellable { (action_link("Cancel this run", "cancel", &[("key", &record.execution_key)])) }
            @if record.status == Status::Failed { a.button href=(html::href("/dlq", &[("key", &record.execution_key)])) { "Its dead letters" } }
        }
        h2 { "Attempts" }
        @if record.history.is_empty() { p { "None yet." } }
        @else {
            table {
                thead { tr { th { "#" } th { "Outcome" } th { "Started" } th { "Finished" } th { "Took" } th { "Owner" } th { "Error" } } }
                tbody { @for h in &record.history {
                    tr {
                        td.num { (h.attempt) }
                        td { (serde_json::to_value(h.outcome).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()) }
                        td { (h.started_at) }
                        td { (h.finished_at) }
                        td.num { (h.duration_ms.map(html::duration_ms).unwrap_or_else(|| "–".into())) }
                        td { code { (h.owner) } }
                        td { (h.error.as_deref().unwrap_or("")) }
                    }
                } }
            }
        }
        h2 { "Input" }
        pre { (record.input.as_deref().map(html::pretty_json).unwrap_or_else(|| "–".into())) }
        h2 { "Result" }
        pre { (record.result.as_deref().map(html::pretty_json).unwrap_or_else(|| "–".into())) }
    };
    Ok(html::page(&ui.frame(&title, "/executions"), body))
}
