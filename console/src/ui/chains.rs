//! Chain runs: the recent ones; one run drawn as its stages (each step a box with its
//! status, attempts and duration; parallel steps side by side in their stage).

use axum::extract::{Query, State};
use maud::{Markup, html};
use schedkit::Status;
use schedkit::ops::chains::{ChainRuns, ChainView, StepView};

use super::html::{self, action_link, job_link};
use super::page::{Page, PageError};
use super::runs::KeyQuery;
use super::state::Shared;

/// Runs the list shows.
const LISTED: i32 = 50;

pub async fn list(State(ui): State<Shared>) -> Page {
    let runs = ChainRuns::new(&ui.sdk, &ui.stage, &ui.catalog);
    let list = if ui.catalog.chains.is_empty() {
        Vec::new()
    } else {
        runs.list(LISTED).await?
    };
    let body = html! {
        @if ui.catalog.chains.is_empty() { p { (ui.catalog.file) " declares no chains." } }
        @else if list.is_empty() { p { "No chain run yet." } }
        @else {
            table {
                thead { tr { th { "Chain run" } th { "Chain" } th { "Status" } th { "Run" } th { "Updated" } th { "Why" } } }
                tbody { @for r in &list {
                    tr {
                        td { a.key href=(html::href("/chain", &[("key", &r.execution_key)])) { (r.execution_key) } }
                        td { (job_link(&r.job)) }
                        td { (html::status(r.status)) }
                        td.num { (r.attempt) }
                        td { (r.updated_at) }
                        td { (r.last_error.as_deref().map(|e| html::clip(e, 100)).unwrap_or_default()) }
                    }
                } }
            }
        }
    };
    Ok(html::page(&ui.frame("Chains", "/chains"), body))
}

pub async fn one(State(ui): State<Shared>, Query(q): Query<KeyQuery>) -> Page {
    let runs = ChainRuns::new(&ui.sdk, &ui.stage, &ui.catalog);
    let view = runs
        .show(&q.key)
        .await?
        .ok_or_else(|| PageError::not_found(format!("there is no chain run `{}`", q.key)))?;
    let title = format!("Chain run {}", view.key);
    let body = html! {
        dl.facts {
            dt { "Chain" } dd { (job_link(&view.chain)) }
            dt { "Status" } dd { (html::status(view.status)) }
            dt { "Run" } dd { (view.run) " (one more per rerun)" }
            dt { "Execution" } dd { code { (view.execution.as_deref().unwrap_or("–")) } @if let Some(s) = &view.execution_status { " " (s) } }
            dt { "Scheduled for" } dd { (view.scheduled_for) }
            dt { "Trace id" } dd { code { (view.trace_id) } }
            dt { "Updated" } dd { (view.finished_at.as_deref().unwrap_or(&view.updated_at)) }
            @if let Some(e) = &view.last_error { dt { "Why" } dd.error { (e) } }
            @if let Some(c) = &view.cancelled { dt { "Cancelled" } dd { "by " (c.by) " at " (c.at) ": " (c.reason) } }
        }
        p.actions { (chain_actions(&view)) }
        (picture(&view))
    };
    Ok(html::page(&ui.frame(&title, "/chains"), body))
}

/// Rerun and skip for a paused run, cancel for one not ended.
fn chain_actions(view: &ChainView) -> Markup {
    let failed: Vec<&StepView> = view
        .stages
        .iter()
        .flatten()
        .filter(|s| s.status == Some(Status::Failed))
        .collect();
    let stopped = view
        .execution_status
        .as_deref()
        .is_some_and(|s| s != "RUNNING");
    html! {
        @if view.status == Status::Paused || stopped {
            (action_link("Rerun from the failed step", "rerun", &[("key", &view.key)]))
        }
        @if view.status == Status::Paused {
            @for s in &failed {
                (action_link(&format!("Skip {}", s.step), "skip", &[("key", &view.key), ("step", &s.step)]))
            }
        }
        @if matches!(view.status, Status::Running | Status::Paused) {
            (action_link("Cancel the run", "chain-cancel", &[("key", &view.key)]))
        }
    }
}

/// The run as its stages, left to right, each step a box (a link to its record); the
/// steps of a parallel stage stacked in one column. SVG drawn here: a diagram library
/// would be JavaScript.
fn picture(view: &ChainView) -> Markup {
    const BOX_W: f64 = 220.0;
    const BOX_H: f64 = 78.0;
    const GAP_X: f64 = 56.0;
    const GAP_Y: f64 = 16.0;
    const TOP: f64 = 28.0;
    let tallest = view.stages.iter().map(Vec::len).max().unwrap_or(1).max(1) as f64;
    let width = view.stages.len() as f64 * (BOX_W + GAP_X) - GAP_X + 20.0;
    let height = TOP + tallest * (BOX_H + GAP_Y) + 10.0;
    // Each stage's steps centred on the same middle line.
    let y_of = |stage: &[StepView], j: usize| {
        let column = stage.len() as f64 * (BOX_H + GAP_Y) - GAP_Y;
        TOP + (tallest * (BOX_H + GAP_Y) - GAP_Y - column) / 2.0 + j as f64 * (BOX_H + GAP_Y)
    };
    let x_of = |i: usize| 10.0 + i as f64 * (BOX_W + GAP_X);
    let middle = TOP + (tallest * (BOX_H + GAP_Y) - GAP_Y) / 2.0;
    html! {
        figure.chain {
            svg viewBox={ "0 0 " (width.max(300.0)) " " (height) } width=(width.max(300.0)) role="img"
                aria-label={ "chain run " (view.key) " in " (view.stages.len()) " stages" } {
                defs { marker #arrow viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto" { path d="M0,0 L10,5 L0,10 z" {} } }
                @for (i, stage) in view.stages.iter().enumerate() {
                    text.stage-label x=(x_of(i)) y="16" { "stage " (i + 1) @if stage.len() > 1 { " (parallel)" } }
                    @if i + 1 < view.stages.len() {
                        line.flow x1=(x_of(i) + BOX_W + 4.0) x2=(x_of(i + 1) - 4.0) y1=(middle) y2=(middle) marker-end="url(#arrow)" {}
                    }
                    @for (j, step) in stage.iter().enumerate() {
                        @let (x, y) = (x_of(i), y_of(stage, j));
                        @let name = step.status.map(|s| s.to_string()).unwrap_or_else(|| "NOT STARTED".into());
                        @let class = step.status.map(|s| s.to_string().to_lowercase()).unwrap_or_else(|| "none".into());
                        a.step href=(html::href("/run", &[("key", &step.key)])) data-step=(step.step) {
                            title { (step.step) " (" (step.job) "): " (name)
                                @if let Some(e) = step.last_error.as_ref().filter(|_| step.status != Some(Status::Done)) { " — " (e) } }
                            rect class={ "box st-" (class) } x=(x) y=(y) width=(BOX_W) height=(BOX_H) rx="6" {}
                            text.step-name x=(x + 10.0) y=(y + 20.0) { (step.step) }
                            text.step-job x=(x + 10.0) y=(y + 37.0) { (step.job) }
                            text.step-status x=(x + 10.0) y=(y + 56.0) { (name) }
                            text.step-facts x=(x + 10.0) y=(y + 71.0) {
                                (step.attempts) " attempt" @if step.attempts != 1 { "s" }
                                @if let Some(ms) = step.duration_ms { " · " (html::duration_ms(ms)) }
                                @if step.skipped.is_some() { " · skipped" }
                            }
                        }
                    }
                }
            }
            figcaption { "Stages run left to right; the steps of a stage run side by side. Each box links to its step's record." }
        }
    }
}
