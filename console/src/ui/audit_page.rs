//! The stage's audit trail, newest first: who did what, when, and how it ended.

use axum::extract::{Query, State};
use maud::html;
use schedkit::ops::audit;
use schedkit::store::{AuditEntry, AuditFilter};
use serde::Deserialize;

use super::html;
use super::page::Page;
use super::state::Shared;

/// Entries read at most.
const LIMIT: usize = 500;

#[derive(Debug, Deserialize, Default)]
pub struct AuditQuery {
    #[serde(default)]
    action: String,
    #[serde(default)]
    by: String,
}

pub async fn page(State(ui): State<Shared>, Query(q): Query<AuditQuery>) -> Page {
    let some = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_string());
    let until = chrono::Utc::now();
    let since = until - chrono::Duration::days(7);
    let filter = AuditFilter {
        by: some(&q.by),
        action: some(&q.action),
    };
    let entries: Vec<AuditEntry> =
        audit::read(&ui.sdk, &ui.stage.table, since, until, &filter, LIMIT).await?;
    let body = html! {
        form.filters method="get" action="/audit" {
            label { "Action " input type="text" name="action" value=(q.action) placeholder="dlq, chains rerun"; }
            label { "By " input type="text" name="by" value=(q.by) placeholder="part of an ARN"; }
            button type="submit" { "Filter" }
        }
        p.note { "The last 7 days, newest first (the newest " (LIMIT) " entries)." }
        @if entries.is_empty() { p { "Nothing recorded." } }
        @else {
            table.audit {
                thead { tr { th { "When" } th { "Who" } th { "What" } th { "Phase" } th { "Outcome" } th { "Details" } } }
                tbody { @for e in &entries {
                    tr {
                        td { (e.when) }
                        td { (html::clip(&e.who, 60)) }
                        td { (e.what) }
                        td { (e.phase) }
                        td { @match (e.phase.as_str(), e.finished) {
                            ("begin", _) => "–",
                            (_, Some(true)) => { "finished" @if let Some(r) = &e.result { ": " (html::clip(&r.to_string(), 120)) } },
                            _ => { "did not finish: " (e.error.as_deref().unwrap_or("?")) " (done: " (e.done.as_deref().unwrap_or("nothing")) ")" },
                        } }
                        td { code { (html::clip(&e.details.to_string(), 160)) } }
                    }
                } }
            }
        }
    };
    Ok(html::page(&ui.frame("Audit trail", "/audit"), body))
}
