//! The jobs: the catalog with next runs (in the job's zone and UTC), success rate and a
//! strip of recent runs; one job's runs on a time line.

use axum::extract::{Path, Query, State};
use chrono::{DateTime, SecondsFormat, Utc};
use maud::{Markup, html};
use schedkit::ExecutionRecord;
use schedkit::ops::executions::{Filter, Records};
use serde::Deserialize;

use super::html::{self, action_link, job_link, run_link};
use super::page::{Page, PageError};
use super::state::Shared;
use crate::cli::jobs_cmd;

/// Runs a job's page draws.
const TIMELINE_RUNS: i32 = 50;

/// Which jobs the list shows, as its links send it (an empty field is no filter).
#[derive(Debug, Deserialize, Default)]
pub struct ListQuery {
    #[serde(default)]
    owner: String,
    #[serde(default)]
    page: String,
}

pub async fn list(State(ui): State<Shared>, Query(q): Query<ListQuery>) -> Page {
    let owner = (!q.owner.trim().is_empty()).then(|| q.owner.trim().to_string());
    let number = match q.page.trim() {
        "" => 1,
        n => n.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| {
            PageError::bad(format!("page `{n}` is not a page number (1, 2, ...)"))
        })?,
    };
    let selection = jobs_cmd::Selection {
        owner: owner.clone(),
        page: schedkit::ops::paging::Page {
            number,
            size: schedkit::ops::paging::Page::DEFAULT_SIZE,
        },
    };
    let (rows, paged) = jobs_cmd::rows(&ui.catalog, &ui.sdk, &ui.stage.table, &selection).await?;
    let owner_text = owner.clone().unwrap_or_default();
    let body = html! {
        form.filters method="get" action="/jobs" {
            label { "Owner " input type="text" name="owner" value=(owner_text); }
            button type="submit" { "Show" }
        }
        (pager(&paged, &owner_text))
        table.jobs {
            thead { tr {
                th { "Job" } th { "Owner" } th { "Schedule" } th { "Next runs" } th { "Last" }
                th { "Success" } th { "Recent runs (oldest → newest)" } th { "Act" }
            } }
            tbody { @for r in &rows {
                tr {
                    td { (job_link(&r.job)) }
                    td { (r.owner) }
                    td { @match (&r.schedule, &r.timezone) {
                        (Some(s), Some(tz)) => { code { (s) } " " (tz) },
                        _ => "on demand",
                    } }
                    td { (next_runs(&ui, r)) }
                    td { (html::maybe_status(r.last_status)) }
                    td.num { (r.success_rate.map(|p| format!("{:.0}% of {}", p * 100.0, r.recent_runs)).unwrap_or_else(|| "–".into())) }
                    td { (strip(&r.recent)) }
                    td.actions { (job_actions(&ui, &r.job, r.paused.is_some())) }
                }
            } }
        }
        (pager(&paged, &owner_text))
    };
    Ok(html::page(&ui.frame("Jobs", "/jobs"), body))
}

/// Where this page stands among the jobs, with links to the pages beside it.
pub fn pager(p: &schedkit::ops::paging::Paged, owner: &str) -> Markup {
    // Saturating: the page number is the visitor's (`?page=18446744073709551615`).
    let first = p
        .number
        .saturating_sub(1)
        .saturating_mul(p.size)
        .saturating_add(1);
    let last = p.number.saturating_mul(p.size).min(p.total);
    let link = |n: usize| html::href("/jobs", &[("owner", owner), ("page", &n.to_string())]);
    html! {
        @if p.number > p.pages {
            nav.pager aria-label="pages of jobs" {
                span { "Page " (p.number) " is past the last page (" (p.pages) "). " }
                a rel="prev" href=(link(p.pages)) { "The last page" }
            }
        } @else if p.pages > 1 {
            nav.pager aria-label="pages of jobs" {
                @if p.number > 1 { a rel="prev" href=(link(p.number - 1)) { "Previous" } " " }
                span { "Jobs " (first.min(p.total)) "–" (last) " of " (p.total) ", page " (p.number) " of " (p.pages) }
                @if p.has_next() { " " a rel="next" href=(link(p.number + 1)) { "Next" } }
            }
        }
    }
}

/// The next runs in the job's zone, each with its UTC; or why there are none.
fn next_runs(ui: &Shared, r: &jobs_cmd::Row) -> Markup {
    if let Some(p) = &r.paused {
        return html! { span.paused { "PAUSED since " (p.at) " by " (p.by) ": " (p.reason) } };
    }
    let zone = ui
        .catalog
        .job(&r.job)
        .and_then(|j| j.schedule.as_ref())
        .map(|s| s.timezone);
    html! {
        @if r.next_runs.is_empty() {
            @if r.schedule.is_none() { "on demand" } @else { "–" }
        }
        ul.plain { @for t in &r.next_runs {
            @let utc = DateTime::parse_from_rfc3339(t).map(|t| t.with_timezone(&Utc)).ok();
            li {
                @match (utc, zone) {
                    (Some(u), Some(z)) if z != chrono_tz::UTC => {
                        time datetime=(t) { (u.with_timezone(&z).format("%a %d %b %H:%M %Z")) }
                        span.utc { " (" (u.format("%H:%M UTC")) ")" }
                    }
                    (Some(u), _) => time datetime=(t) { (u.format("%a %d %b %H:%M UTC")) },
                    _ => (t),
                }
            }
        } }
    }
}

/// The last runs as small squares coloured by status, oldest first, each a link.
fn strip(recent: &[ExecutionRecord]) -> Markup {
    html! {
        span.strip role="list" {
            @for r in recent.iter().rev() {
                @let name = r.status.to_string();
                a role="listitem" class={ "sq st-" (name.to_lowercase()) }
                    href=(html::href("/run", &[("key", &r.execution_key)]))
                    title={ (r.execution_key) ": " (name) } { span.sr { (name) } }
            }
        }
    }
}

/// Pause or resume (scheduled jobs), and fire.
fn job_actions(ui: &Shared, job: &str, paused: bool) -> Markup {
    let scheduled = ui.catalog.job(job).is_some_and(|j| j.schedule.is_some());
    html! {
        @if scheduled {
            @if paused { (action_link("Resume", "resume", &[("job", job)])) }
            @else { (action_link("Pause", "pause", &[("job", job)])) }
        }
        (action_link("Run now", "fire", &[("job", job)]))
    }
}

pub async fn one(State(ui): State<Shared>, Path(job): Path<String>) -> Page {
    if ui.catalog.job(&job).is_none() && ui.catalog.chain(&job).is_none() {
        return Err(PageError::not_found(format!(
            "`{job}` is not a job or chain of {}",
            ui.catalog.file
        )));
    }
    let records = Records::new(&ui.sdk, &ui.stage.table);
    let (runs, _) = records
        .list(&Filter {
            job: Some(job.clone()),
            limit: TIMELINE_RUNS,
            ..Default::default()
        })
        .await?;
    let paused = schedkit::store::Pauses::for_table(&ui.sdk, &ui.stage.table)
        .of([job.as_str()])
        .await
        .map_err(|e| PageError::from(anyhow::anyhow!("reading the pauses: {e}")))?;
    let title = format!("Job {job}");
    let body = html! {
        @if let Some(j) = ui.catalog.job(&job) {
            p { "Owner " (j.spec.owner) "; "
                @match &j.spec.schedule { Some(s) => { "schedule " code { (s.expression) } " in " (s.timezone) }, None => "run on demand" }
                @let limits = schedkit::ops::limits::describe(j);
                @if !limits.is_empty() { "; " (limits) } "." }
        }
        @if let Some(p) = paused.get(&job) {
            p.paused { "PAUSED since " (p.at) " by " (p.by) ": " (p.reason) }
        }
        p.actions { (job_actions(&ui, &job, paused.contains_key(&job)))
            " " a href=(html::href("/executions", &[("job", &job)])) { "All its records" }
            " " a href=(html::href("/dlq", &[("job", &job)])) { "Its dead letters" } }
        h2 { "Its last " (runs.len()) " runs on a time line" }
        (timeline(&runs))
        table {
            thead { tr { th { "Run" } th { "Status" } th { "Scheduled for" } th { "Started" } th { "Took" } th { "Lag" } th { "Attempts" } th { "Last error" } } }
            tbody { @for r in &runs {
                tr {
                    td { (run_link(&r.execution_key)) }
                    td { (html::status(r.status)) }
                    td { (r.scheduled_for) }
                    td { (r.started_at.as_deref().unwrap_or("–")) }
                    td.num { (r.duration_ms.map(html::duration_ms).unwrap_or_else(|| "–".into())) }
                    td.num { (lag(r).map(|l| html::duration_ms(l.max(0) as u64)).unwrap_or_else(|| "–".into())) }
                    td.num { (r.attempt) }
                    td { (r.last_error.as_deref().map(|e| html::clip(e, 80)).unwrap_or_default()) }
                }
            } }
        }
    };
    Ok(html::page(&ui.frame(&title, "/jobs"), body))
}

fn instant(t: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Milliseconds from when the run was due to when its latest attempt started.
fn lag(r: &ExecutionRecord) -> Option<i64> {
    let due = instant(&r.scheduled_for)?;
    let started = instant(r.started_at.as_deref()?)?;
    Some((started - due).num_milliseconds())
}

/// The runs on one time axis, a row each (newest on top): a thin line from when it was
/// due (or the axis's start) to when it started (the schedule's lag), a bar from its start for as long as it
/// took, coloured by its outcome. Drawn here as SVG: a chart library would be JavaScript.
fn timeline(runs: &[ExecutionRecord]) -> Markup {
    const W: f64 = 960.0;
    const LEFT: f64 = 10.0;
    const ROW: f64 = 16.0;
    let spans: Vec<(DateTime<Utc>, DateTime<Utc>, DateTime<Utc>)> = runs
        .iter()
        .map(|r| {
            let due = instant(&r.scheduled_for).unwrap_or_default();
            let start = r.started_at.as_deref().and_then(instant).unwrap_or(due);
            let end = r
                .finished_at
                .as_deref()
                .and_then(instant)
                .unwrap_or_else(|| {
                    start + chrono::Duration::milliseconds(r.duration_ms.unwrap_or(0) as i64)
                });
            (due, start, end.max(start))
        })
        .collect();
    // From the first start: a run due long before it started (a backfill, a redrive)
    // would squeeze every bar to a line; its wait is drawn from the left edge.
    let Some(from) = spans.iter().map(|s| s.1).min() else {
        return html! { p { "No runs yet." } };
    };
    let to = spans.iter().map(|s| s.2).max().unwrap_or(from);
    let total = ((to - from).num_milliseconds().max(1)) as f64;
    let x = |t: DateTime<Utc>| {
        LEFT + (t.max(from) - from).num_milliseconds() as f64 / total * (W - 2.0 * LEFT)
    };
    let height = ROW * runs.len() as f64 + 30.0;
    html! {
        figure.timeline {
            svg viewBox={ "0 0 " (W) " " (height) } width="100%" role="img"
                aria-label={ (runs.len()) " runs from " (from.to_rfc3339_opts(SecondsFormat::Secs, true)) " to " (to.to_rfc3339_opts(SecondsFormat::Secs, true)) } {
                @for (i, (r, (due, start, end))) in runs.iter().zip(&spans).enumerate() {
                    @let y = 4.0 + ROW * i as f64;
                    @let name = r.status.to_string();
                    a href=(html::href("/run", &[("key", &r.execution_key)])) {
                        title { (r.execution_key) ": " (name) ", due " (r.scheduled_for)
                            ", took " (r.duration_ms.map(html::duration_ms).unwrap_or_else(|| "–".into()))
                            ", lag " (lag(r).map(|l| html::duration_ms(l.max(0) as u64)).unwrap_or_else(|| "–".into())) }
                        line.lag x1=(format!("{:.1}", x(*due))) x2=(format!("{:.1}", x(*start))) y1=(y + 5.0) y2=(y + 5.0) {}
                        rect class={ "bar st-" (name.to_lowercase()) } x=(format!("{:.1}", x(*start))) y=(y)
                            width=(format!("{:.1}", (x(*end) - x(*start)).max(4.0))) height="10" rx="2" {}
                    }
                }
                text.axis x=(LEFT) y=(height - 8.0) { (from.format("%d %b %H:%M:%S UTC")) }
                text.axis x=(W - LEFT) y=(height - 8.0) text-anchor="end" { (to.format("%d %b %H:%M:%S UTC")) }
            }
            figcaption { "Each row a run, newest on top: the thin line is the wait from when it was due to its start; the bar, how long it ran, coloured by its outcome." }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedkit::ops::paging::Page;

    #[test]
    fn a_page_past_the_last_or_past_any_number_says_so_and_links_to_the_last() {
        for number in [21, usize::MAX] {
            let paged = Page { number, size: 50 }.of(1000);
            let html = pager(&paged, "").into_string();
            assert!(html.contains("is past the last page (20)"), "{html}");
            assert!(html.contains("page=20"), "{html}");
        }
        let html = pager(
            &Page {
                number: 20,
                size: 50,
            }
            .of(1000),
            "",
        )
        .into_string();
        assert!(
            html.contains("Jobs 951–1000 of 1000, page 20 of 20"),
            "{html}"
        );
    }
}
