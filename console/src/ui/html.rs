//! The frame every page shares (head, navigation, the stage), and the small pieces pages
//! are made of: a status badge, a link to a run, a form's hidden fields. HTML is built with
//! `maud`, which escapes every value it is given: nothing from a record reaches the page as
//! markup.

use maud::{DOCTYPE, Markup, html};
use schedkit::Status;

/// The stylesheet, in the binary: the page fetches nothing from elsewhere.
pub const STYLE: &str = include_str!("../../assets/ui.css");
/// The tab's icon (an SVG clock face), in the binary.
pub const ICON: &str = include_str!("../../assets/icon.svg");

/// The navigation's entries: (path, label).
const NAV: [(&str, &str); 7] = [
    ("/", "Overview"),
    ("/jobs", "Jobs"),
    ("/executions", "Executions"),
    ("/chains", "Chains"),
    ("/dlq", "Dead letters"),
    ("/audit", "Audit"),
    ("/help", "Help"),
];

/// What a page says of itself besides its body.
pub struct Frame<'a> {
    /// The `<title>` and the heading.
    pub title: &'a str,
    /// The navigation entry to mark as current.
    pub section: &'a str,
    /// The stage the server works on.
    pub stage: &'a str,
    /// Reload every this many seconds (the overview); None for pages that keep still.
    pub refresh: Option<u32>,
}

/// A whole page.
pub fn page(frame: &Frame, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(s) = frame.refresh {
                    meta http-equiv="refresh" content=(s);
                }
                title { (frame.title) " · schedkit " (frame.stage) }
                link rel="stylesheet" href="/assets/ui.css";
                link rel="icon" href="/assets/icon.svg" type="image/svg+xml";
            }
            body {
                a.skip href="#main" { "Skip to the content" }
                header {
                    span.brand { "schedkit" }
                    span.stage title="the stage this page reads and acts on" { "stage " strong { (frame.stage) } }
                    nav aria-label="sections" {
                        @for (path, label) in NAV {
                            @if path == frame.section {
                                a href=(path) aria-current="page" { (label) }
                            } @else {
                                a href=(path) { (label) }
                            }
                        }
                    }
                }
                main #main {
                    h1 { (frame.title) }
                    (body)
                }
            }
        }
    }
}

/// A page for a request the guards refused (no frame: it may be a stranger's).
pub fn refusal(why: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "refused · schedkit" } }
            body { h1 { "Refused" } p.refused { (why) } }
        }
    }
}

/// A status as a coloured badge (the colour says it; the word too, for every reader).
pub fn status(s: Status) -> Markup {
    let name = s.to_string();
    html! { span class={ "st st-" (name.to_lowercase()) } { (name) } }
}

/// A status that may be absent (a step not started, a job never run).
pub fn maybe_status(s: Option<Status>) -> Markup {
    match s {
        Some(s) => status(s),
        None => html! { span.st.st-none { "–" } },
    }
}

/// `path?k=v&…`, each value encoded.
pub fn href(path: &str, pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return path.to_string();
    }
    format!(
        "{path}?{}",
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    )
}

/// A link to one run's page.
pub fn run_link(key: &str) -> Markup {
    html! { a.key href=(href("/run", &[("key", key)])) { (key) } }
}

/// A link to one job's page.
pub fn job_link(job: &str) -> Markup {
    html! { a href=(format!("/jobs/{}", encode_segment(job))) { (job) } }
}

/// A path segment, percent-encoded.
pub fn encode_segment(text: &str) -> String {
    serde_urlencoded::to_string([("", text)])
        .unwrap_or_default()
        .trim_start_matches('=')
        .replace('+', "%20")
}

/// A button to an action's confirmation page: a link styled as a button (nothing changes
/// until that page's form is sent).
pub fn action_link(label: &str, action: &str, pairs: &[(&str, &str)]) -> Markup {
    let mut all = vec![("action", action)];
    all.extend_from_slice(pairs);
    html! { a.button href=(href("/confirm", &all)) { (label) } }
}

/// JSON text, indented when it parses.
pub fn pretty_json(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_string())
}

/// At most `n` characters, with an ellipsis when cut.
pub fn clip(text: &str, n: usize) -> String {
    crate::cli::clip(text, n)
}

/// `340 ms`, `1.2 s`, `3 min 20 s`, `5 h 04 min`, `31 d 07 h`.
pub fn duration_ms(ms: u64) -> String {
    let s = ms / 1000;
    match ms {
        0..1000 => format!("{ms} ms"),
        1000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {} s", s / 60, s % 60),
        3_600_000..86_400_000 => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {:02} h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_unit_that_fits() {
        assert_eq!(duration_ms(340), "340 ms");
        assert_eq!(duration_ms(1_234), "1.2 s");
        assert_eq!(duration_ms(200_000), "3 min 20 s");
        assert_eq!(duration_ms(18_240_000), "5 h 04 min");
        assert_eq!(duration_ms(2_705_440_000), "31 d 07 h");
    }

    #[test]
    fn links_encode_what_they_carry() {
        assert_eq!(
            href("/run", &[("key", "month-end#2026-11&x")]),
            "/run?key=month-end%232026-11%26x"
        );
        assert_eq!(encode_segment("a b/c"), "a%20b%2Fc");
    }
}
