//! A command's output: read line by line (a line cut at a bound, so a process that
//! writes without newlines cannot grow the worker's memory), its secrets masked, logged with
//! the run's key and its last bytes kept for the record and the failure.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// How much of a process's output (stdout and stderr, interleaved as they came) its record
/// and its failure keep: the end, where the reason usually is.
pub const OUTPUT_TAIL_BYTES: usize = 2048;

/// How much of the output a failure's message keeps: with the exit code it fits the dead
/// letter's error attribute (1,024 bytes), which keeps the start of a longer message.
pub const FAILURE_TAIL_BYTES: usize = 900;

/// The longest line read at once: a longer one is taken in pieces of this size.
pub(super) const LINE_MAX: usize = 8 * 1024;

/// The shortest secret value masked: shorter ones (`1`, `on`) would mask ordinary output.
pub(super) const MASKED_FROM: usize = 4;

/// What replaces a secret's value.
const MASKED: &str = "***";

/// The values to mask in a process's output: its secrets', longest first (so a value that
/// contains another is masked whole).
#[derive(Debug, Default)]
pub(super) struct Mask {
    values: Vec<String>,
}

impl Mask {
    pub(super) fn of<'a>(values: impl IntoIterator<Item = &'a str>) -> Mask {
        let mut values: Vec<String> = values
            .into_iter()
            .flat_map(printed_forms)
            .filter(|v| v.len() >= MASKED_FROM)
            .collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Mask { values }
    }

    /// `line` with every secret value replaced by `***`.
    pub(super) fn apply(&self, line: &str) -> String {
        let mut line = line.to_string();
        for value in &self.values {
            if line.contains(value.as_str()) {
                line = line.replace(value.as_str(), MASKED);
            }
        }
        line
    }
}

/// The forms in which a process prints a secret's value, line by line as its output is
/// read: the value, trimmed (a parameter stored from a file keeps its newline), each of its
/// lines (a key of many lines), and, for a JSON secret (Secrets Manager's usual form), each
/// string in it (a password printed alone).
fn printed_forms(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_string(), value.trim().to_string()];
    forms.extend(value.lines().map(|l| l.trim().to_string()));
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(value) {
        strings(&json, &mut forms);
    }
    forms
}

fn strings(json: &serde_json::Value, out: &mut Vec<String>) {
    match json {
        serde_json::Value::String(s) => {
            out.push(s.clone());
            out.extend(s.lines().map(|l| l.trim().to_string()));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        serde_json::Value::Object(fields) => fields.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// Each line (or piece of a long one) to the log, with the run's key, and to the tail.
pub(super) async fn forward(
    stream: impl AsyncRead + Unpin,
    name: &'static str,
    key: String,
    tail: Arc<Mutex<Tail>>,
    mask: Arc<Mask>,
) {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    while next_line(&mut reader, &mut line).await {
        let text = String::from_utf8_lossy(&line);
        let text = mask.apply(text.trim_end_matches(['\n', '\r']));
        tracing::info!(key = %key, stream = name, line = %text, "command output");
        tail.lock().expect("the tail's lock").push(&text);
    }
}

/// Reads the next line into `line` (cleared first), ending at a newline or at
/// [`LINE_MAX`] bytes, whichever comes first; false at the end of the stream. A secret cut
/// by the bound is not masked (its two pieces are not the value): bounded memory first.
pub(super) async fn next_line(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
) -> bool {
    line.clear();
    loop {
        let available = match reader.fill_buf().await {
            Ok([]) | Err(_) => return !line.is_empty(),
            Ok(bytes) => bytes,
        };
        let room = LINE_MAX - line.len();
        let take = available.iter().take(room).position(|b| *b == b'\n');
        let (used, done) = match take {
            Some(at) => (at + 1, true),
            None => {
                let used = available.len().min(room);
                (used, line.len() + used >= LINE_MAX)
            }
        };
        line.extend_from_slice(&available[..used]);
        reader.consume(used);
        if done {
            return true;
        }
    }
}

/// The last [`OUTPUT_TAIL_BYTES`] of output, whole lines where they fit.
#[derive(Default)]
pub(super) struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl Tail {
    pub(super) fn push(&mut self, line: &str) {
        let line = if line.len() > OUTPUT_TAIL_BYTES {
            let mut start = line.len() - OUTPUT_TAIL_BYTES;
            while !line.is_char_boundary(start) {
                start += 1;
            }
            &line[start..]
        } else {
            line
        };
        self.bytes += line.len() + 1;
        self.lines.push_back(line.to_string());
        while self.bytes > OUTPUT_TAIL_BYTES + 1 {
            let first = self.lines.pop_front().expect("not empty while over");
            self.bytes -= first.len() + 1;
        }
    }

    pub(super) fn text(&self) -> String {
        Vec::from(self.lines.clone()).join("\n")
    }

    /// The last `bytes` of [`Tail::text`], from a character's start.
    pub(super) fn last(&self, bytes: usize) -> String {
        let text = self.text();
        let mut start = text.len().saturating_sub(bytes);
        while !text.is_char_boundary(start) {
            start += 1;
        }
        text[start..].to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes_in_whole_lines() {
        let mut tail = Tail::default();
        for i in 0..1000 {
            tail.push(&format!("line {i}"));
        }
        let text = tail.text();
        assert!(text.len() <= OUTPUT_TAIL_BYTES, "{}", text.len());
        assert!(text.ends_with("line 999"), "{text}");
        assert!(text.starts_with("line "), "{text}");
        let mut long = Tail::default();
        long.push(&"é".repeat(3000));
        assert!(long.text().len() <= OUTPUT_TAIL_BYTES);
        let last = tail.last(FAILURE_TAIL_BYTES);
        assert!(last.len() <= FAILURE_TAIL_BYTES && last.ends_with("line 999"));
    }

    #[tokio::test]
    async fn a_line_without_end_is_read_in_bounded_pieces() {
        let mut input: &[u8] = &vec![b'a'; 5 * LINE_MAX + 10];
        let mut reader = BufReader::new(&mut input);
        let mut line = Vec::new();
        let mut pieces = Vec::new();
        while next_line(&mut reader, &mut line).await {
            pieces.push(line.len());
        }
        assert_eq!(
            pieces,
            [LINE_MAX, LINE_MAX, LINE_MAX, LINE_MAX, LINE_MAX, 10]
        );
        let mut lines: &[u8] = b"one\ntwo\n\nthree";
        let mut reader = BufReader::new(&mut lines);
        let mut seen = Vec::new();
        while next_line(&mut reader, &mut line).await {
            seen.push(String::from_utf8(line.clone()).unwrap());
        }
        assert_eq!(seen, ["one\n", "two\n", "\n", "three"]);
    }

    #[test]
    fn secrets_are_masked_longest_first_and_short_values_left() {
        let mask = Mask::of(["postgres://u:pw@db/app", "pw@db", "on"]);
        assert_eq!(
            mask.apply("connect postgres://u:pw@db/app failed (pw@db) on retry"),
            "connect *** failed (***) on retry"
        );
    }
}
