//! The results of `make bench`: sections of rows (a measure, schedkit's samples, the peer's,
//! the ratio and the target), written as `bench/results.md` for people and
//! `bench/results.json` for the chart (`bench/chart.py`).

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::stats::{cell, median};

/// Which way a measure improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
}

/// One measure, both sides' samples.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: String,
    pub digits: usize,
    pub better: Better,
    pub ours: Vec<f64>,
    pub theirs: Vec<f64>,
    /// The target for the ratio (schedkit's advantage), where it sets one.
    pub target: Option<f64>,
    /// What the peer's cell says instead of samples when the peer has nothing to measure
    /// (a feature it lacks): a row without the peer's figure still says why.
    pub theirs_text: Option<String>,
}

impl Row {
    pub fn new(name: impl Into<String>, digits: usize, better: Better) -> Row {
        Row {
            name: name.into(),
            digits,
            better,
            ours: Vec::new(),
            theirs: Vec::new(),
            target: None,
            theirs_text: None,
        }
    }

    pub fn target(mut self, ratio: f64) -> Row {
        self.target = Some(ratio);
        self
    }

    pub fn samples(mut self, ours: Vec<f64>, theirs: Vec<f64>) -> Row {
        self.ours = ours;
        self.theirs = theirs;
        self
    }

    /// schedkit's samples, and `text` in the peer's cell: the peer has no such thing.
    pub fn ours_only(mut self, ours: Vec<f64>, text: impl Into<String>) -> Row {
        self.ours = ours;
        self.theirs = Vec::new();
        self.theirs_text = Some(text.into());
        self
    }

    /// How many times better schedkit is on this measure (below 1: worse).
    pub fn advantage(&self) -> f64 {
        let (ours, theirs) = (median(&self.ours), median(&self.theirs));
        match self.better {
            Better::Lower => theirs / ours,
            Better::Higher => ours / theirs,
        }
    }

    /// Whether the target is met; None without a target.
    pub fn met(&self) -> Option<bool> {
        self.target.map(|t| self.advantage() >= t)
    }
}

/// Rows measured the same way against the same peer.
#[derive(Debug, Clone)]
pub struct Section {
    pub title: String,
    pub ours: String,
    pub theirs: String,
    pub rows: Vec<Row>,
    /// What a reader needs to read the rows right (how measured, what favours whom).
    pub notes: Vec<String>,
}

/// Everything one `make bench` measured.
#[derive(Debug, Clone)]
pub struct Results {
    pub command: String,
    pub date: String,
    pub machine: String,
    pub sections: Vec<Section>,
}

/// A ratio as the tables print it: `11×`, `5.6×`, `—` when there is none.
pub fn ratio_text(r: f64) -> String {
    if !r.is_finite() {
        "—".into()
    } else if r >= 10.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.1}×")
    }
}

impl Results {
    /// `bench/results.md`.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# schedkit side by side with its peers\n");
        let _ = writeln!(
            out,
            "Measured {} by `{}` on {}. Medians of the samples, min–max in brackets; \
             \"advantage\" is how many times better schedkit is on the row (below 1×: worse); \
             the targets are issue 14's. The chart: `results.png`.\n",
            self.date, self.command, self.machine
        );
        for s in &self.sections {
            let _ = writeln!(out, "## {}\n", s.title);
            let _ = writeln!(
                out,
                "| measure | {} | {} | advantage | target |",
                s.ours, s.theirs
            );
            let _ = writeln!(out, "| --- | ---: | ---: | ---: | :---: |");
            for r in &s.rows {
                let target = match (r.target, r.met()) {
                    (Some(t), Some(true)) => format!("≥ {} met", ratio_text(t)),
                    (Some(t), _) => format!("≥ {} **missed**", ratio_text(t)),
                    _ => String::new(),
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} |",
                    r.name,
                    cell(&r.ours, r.digits),
                    r.theirs_text
                        .clone()
                        .unwrap_or_else(|| cell(&r.theirs, r.digits)),
                    ratio_text(r.advantage()),
                    target
                );
            }
            out.push('\n');
            for n in &s.notes {
                let _ = writeln!(out, "- {n}");
            }
            if !s.notes.is_empty() {
                out.push('\n');
            }
        }
        out
    }

    /// `bench/results.json`: every row with its samples, advantage and target.
    pub fn json(&self) -> Value {
        json!({
            "command": self.command,
            "date": self.date,
            "machine": self.machine,
            "sections": self.sections.iter().map(|s| json!({
                "title": s.title,
                "ours": s.ours,
                "theirs": s.theirs,
                "rows": s.rows.iter().map(|r| json!({
                    "name": r.name,
                    "ours": r.ours,
                    "theirs": r.theirs,
                    "theirs_text": r.theirs_text,
                    "advantage": r.advantage(),
                    "target": r.target,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }
}

/// This machine in one line: CPU model, cores, memory, kernel.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
        .unwrap_or_else(|| "an unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory_gib = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{cores} cores of {model}, {memory_gib:.0} GiB, Linux {}",
        kernel.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_advantage_reads_the_same_way_whichever_way_a_measure_improves() {
        let cpu = Row::new("cpu", 1, Better::Lower)
            .samples(vec![1.0, 3.0], vec![10.0, 10.0])
            .target(5.0);
        assert_eq!(cpu.advantage(), 5.0);
        assert_eq!(cpu.met(), Some(true));
        let rate = Row::new("letters/s", 0, Better::Higher)
            .samples(vec![900.0], vec![100.0])
            .target(20.0);
        assert_eq!(rate.advantage(), 9.0);
        assert_eq!(rate.met(), Some(false));
    }

    #[test]
    fn the_markdown_names_a_missed_target() {
        let results = Results {
            command: "make bench".into(),
            date: "2026-12-01".into(),
            machine: "a test".into(),
            sections: vec![Section {
                title: "t".into(),
                ours: "schedkit".into(),
                theirs: "peer".into(),
                rows: vec![
                    Row::new("rss", 1, Better::Lower)
                        .samples(vec![20.0], vec![60.0])
                        .target(4.0),
                ],
                notes: vec![],
            }],
        };
        let md = results.markdown();
        assert!(
            md.contains("| rss | 20.0 | 60.0 | 3.0× | ≥ 4.0× **missed** |"),
            "{md}"
        );
    }

    #[test]
    fn a_row_the_peer_has_no_figure_for_says_why_in_its_cell() {
        let results = Results {
            command: "make bench".into(),
            date: "2026-12-01".into(),
            machine: "a test".into(),
            sections: vec![Section {
                title: "t".into(),
                ours: "schedkit".into(),
                theirs: "peer".into(),
                rows: vec![Row::new("runs/s", 0, Better::Higher).ours_only(vec![90.0], "none")],
                notes: vec![],
            }],
        };
        let md = results.markdown();
        assert!(md.contains("| runs/s | 90 | none | — |  |"), "{md}");
        let row = &results.json()["sections"][0]["rows"][0];
        assert_eq!(row["theirs_text"], "none", "{row}");
        assert_eq!(row["theirs"], serde_json::json!([]), "{row}");
    }
}
