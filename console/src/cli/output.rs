//! Tables for people, JSON for scripts: every command prints one or the other.

use clap::ValueEnum;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

impl Output {
    /// Prints `rows` as an aligned table (with `headers`) or as a JSON array.
    pub fn rows<T: Serialize>(
        self,
        headers: &[&str],
        rows: &[T],
        cells: impl Fn(&T) -> Vec<String>,
    ) {
        match self {
            Output::Json => println!(
                "{}",
                serde_json::to_string_pretty(rows).expect("rows serialise")
            ),
            Output::Table => print!(
                "{}",
                table(headers, &rows.iter().map(cells).collect::<Vec<_>>())
            ),
        }
    }
}

/// What an action did: a sentence for people and a JSON value for scripts. The commands
/// print it (as `--output` says); the web page shows the sentence.
#[derive(Debug, Clone)]
pub struct Acted {
    pub text: String,
    pub details: serde_json::Value,
}

impl Acted {
    /// From the sentence and the value, as `Output::outcome` takes them.
    pub fn of(text: &str, details: &serde_json::Value) -> Acted {
        Acted {
            text: text.to_string(),
            details: details.clone(),
        }
    }
}

impl Output {
    /// Prints what an action did: `text` for people, `value` as JSON for scripts.
    pub fn outcome(self, text: &str, value: &serde_json::Value) {
        match self {
            Output::Json => println!(
                "{}",
                serde_json::to_string_pretty(value).expect("JSON values serialise")
            ),
            Output::Table => println!("{text}"),
        }
    }
}

/// Columns padded to their widest cell, two spaces apart.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}
