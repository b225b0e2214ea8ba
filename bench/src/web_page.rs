//! The web page (issue 27): what the operator's pages cost on a stage of `records`
//! execution records and `letters` dead letters. `schedkit ui` (the console binary) serves
//! the stage with every AWS request through the counting forwarder; each page is fetched
//! as a browser fetches it, `rounds` times: the time to the whole page, and the DynamoDB,
//! SQS and other requests it made. A page that scanned the table would fail the run.
//! Powertools for AWS Lambda has no page: the peer's cells say so.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use chrono::{DurationRound, TimeDelta, Utc};
use schedkit::{Envelope, Status};
use schedkit_testkit::Stack;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::report::{Better, Row, Section};
use crate::seed;
use crate::stats::median;
use crate::throughput;
use crate::wire::WireCounter;

/// What the peer's cells say.
pub const PEER_HAS_NONE: &str = "none (the peer has no web page)";

/// The pages measured: (label, path).
const PAGES: [(&str, &str); 3] = [
    ("the overview", "/"),
    ("a job's page", "/jobs/partner-export"),
    ("the dead letters", "/dlq"),
];

/// The shipped catalog's jobs the records belong to.
const JOBS: [&str; 4] = [
    "flaky-sync",
    "long-report",
    "partner-export",
    "record-invoice",
];

/// One page's figures, one sample per round.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub ms: Vec<f64>,
    pub dynamodb: Vec<f64>,
    pub sqs: Vec<f64>,
    pub other: Vec<f64>,
    pub bytes: Vec<f64>,
}

/// Every page (none with `--page-records 0`).
#[derive(Debug, Clone, Default)]
pub struct PageCost {
    pub records: usize,
    pub letters: usize,
    pub pages: Vec<(&'static str, Measured)>,
}

/// `records` records of the shipped jobs, one a minute back from now, one in 50 FAILED.
async fn fill_table(stack: &Stack, records: usize) -> anyhow::Result<usize> {
    let template = seed::done_record(&stack.store()).await?;
    let now = Utc::now().duration_trunc(TimeDelta::minutes(1))?;
    let all = (0..records).map(|i| {
        let job = JOBS[i % JOBS.len()];
        let at =
            (now - TimeDelta::minutes(i as i64)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let mut r = template.clone();
        r.execution_key = format!("{job}#{at}");
        r.job = job.into();
        r.scheduled_for = at;
        if i % 50 == 7 {
            r.status = Status::Failed;
            r.last_error = Some("export rejected by the partner API: 422 account blocked".into());
        }
        r
    });
    seed::put_records(stack, all).await
}

/// `letters` dead letters of the shipped jobs, as the worker writes them.
async fn fill_dlq(stack: &Stack, letters: usize) -> anyhow::Result<()> {
    let at = "2026-11-02T09:00:00Z".parse().expect("an instant");
    let all = (0..letters).map(|i| {
        let mut e = Envelope::new(JOBS[i % JOBS.len()], at);
        e.key = Some(format!("letter-{i}"));
        (e.to_json(), Some("attempts-exhausted"))
    });
    seed::dead_letters(stack, all).await
}

/// `schedkit ui` on the stage, its AWS requests through `wire`; killed when dropped.
struct Server {
    child: Child,
    port: u16,
    /// The access token's cookie, as the browser keeps it after the printed URL.
    cookie: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(
    console: &Path,
    stack: &Stack,
    wire: &WireCounter,
    catalog: Option<&Path>,
) -> anyhow::Result<Server> {
    // Its stderr in a file: a pipe nobody reads would fill, or break its writes.
    let log = schedkit_testkit::target_dir().join(format!("{}-ui.log", stack.name));
    let mut command = Command::new(console);
    if let Some(catalog) = catalog {
        command.arg("--catalog").arg(catalog);
    }
    let mut child = command
        .current_dir(schedkit_testkit::root())
        .args(["--stage", &stack.name, "ui", "--listen", "127.0.0.1:0"])
        .env("AWS_ENDPOINT_URL", wire.endpoint())
        // LocalStack's test keys, as the rest of the benchmark signs with.
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env(
            "AWS_REGION",
            stack
                .sqs
                .config()
                .region()
                .map_or("us-east-1", |r| r.as_ref()),
        )
        .env_remove("SCHEDKIT_CATALOG")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
    // `schedkit ui: http://127.0.0.1:<port>/?token=<token>`
    let printed = line.trim().strip_prefix("schedkit ui: http://127.0.0.1:");
    let parts = printed.and_then(|rest| {
        let (port, token) = rest.split_once("/?token=")?;
        Some((port.parse::<u16>().ok()?, token.to_string()))
    });
    let Some((port, token)) = parts else {
        let _ = child.kill();
        let _ = child.wait();
        anyhow::bail!(
            "schedkit ui did not print its URL: {line:?}; {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    };
    Ok(Server {
        child,
        port,
        cookie: format!("schedkit_ui_token_{port}={token}"),
    })
}

/// One page, whole: its status and its size.
async fn fetch(server: &Server, path: &str) -> anyhow::Result<(String, usize)> {
    let port = server.port;
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(
        format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {}\r\nConnection: close\r\n\r\n",
            server.cookie
        )
        .as_bytes(),
    )
    .await?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await?;
    let text = String::from_utf8_lossy(&answer);
    Ok((
        text.lines().next().unwrap_or_default().to_string(),
        answer.len(),
    ))
}

/// The overview of the stage with the catalog `catalog`, once (after a first look, unmeasured):
/// milliseconds to the whole page, and the AWS requests it made.
pub async fn overview_of(
    console: &Path,
    stack: &Stack,
    wire: &WireCounter,
    catalog: &Path,
) -> anyhow::Result<(f64, f64)> {
    let server = serve(console, stack, wire, Some(catalog))?;
    fetch(&server, "/help").await?;
    wire.take();
    let started = Instant::now();
    let (status, _) = fetch(&server, "/").await?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let counts = wire.take();
    anyhow::ensure!(status.contains(" 200 "), "the overview: {status}");
    Ok((ms, throughput::per(&counts, 1, |_, _| true)))
}

/// Fills the stage, then fetches each page `rounds` times, in turn.
pub async fn run(
    console: &Path,
    stack: &Stack,
    wire: &WireCounter,
    records: usize,
    letters: usize,
    rounds: usize,
) -> anyhow::Result<PageCost> {
    let mut out = PageCost {
        records,
        letters,
        ..PageCost::default()
    };
    if records == 0 {
        return Ok(out);
    }
    stack.reset().await?;
    out.records = fill_table(stack, records).await?;
    fill_dlq(stack, letters).await?;
    println!("web page: {} records, {letters} dead letters", out.records);
    let server = serve(console, stack, wire, None)?;
    let mut pages: Vec<(&'static str, Measured)> = PAGES
        .iter()
        .map(|(label, _)| (*label, Measured::default()))
        .collect();
    // A first look, unmeasured: the server's connections and credentials made once.
    fetch(&server, "/help").await?;
    for _ in 0..rounds {
        for (i, (_, path)) in PAGES.iter().enumerate() {
            wire.take();
            let started = Instant::now();
            let (status, bytes) = fetch(&server, path).await?;
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            let counts = wire.take();
            anyhow::ensure!(status.contains(" 200 "), "{path}: {status}");
            let scans: Vec<_> = counts
                .keys()
                .filter(|(op, _)| op.ends_with(".Scan"))
                .collect();
            anyhow::ensure!(scans.is_empty(), "{path} scanned: {scans:?}");
            let m = &mut pages[i].1;
            m.ms.push(ms);
            m.dynamodb
                .push(throughput::per(&counts, 1, throughput::dynamodb));
            m.sqs.push(throughput::per(&counts, 1, |op, _| {
                op.starts_with("AmazonSQS")
            }));
            m.other.push(throughput::per(&counts, 1, |op, _| {
                !op.starts_with("AmazonSQS") && !op.starts_with("DynamoDB")
            }));
            m.bytes.push(bytes as f64);
        }
    }
    drop(server);
    for (label, m) in &pages {
        println!(
            "  {label:<18} {:>8.1} ms, {:>4.0} DynamoDB, {:>4.0} SQS, {:>3.0} other requests, {:>7.0} bytes",
            median(&m.ms),
            median(&m.dynamodb),
            median(&m.sqs),
            median(&m.other),
            median(&m.bytes)
        );
    }
    out.pages = pages;
    Ok(out)
}

impl PageCost {
    /// The report's section; `theirs` is the peer's column title.
    pub fn section(&self, theirs: &str) -> Section {
        let mut rows = Vec::new();
        for (label, m) in &self.pages {
            let row = |name: &str, digits, samples: Vec<f64>| {
                Row::new(format!("{label}: {name}"), digits, Better::Lower)
                    .ours_only(samples, PEER_HAS_NONE)
            };
            rows.push(row("milliseconds to the whole page", 1, m.ms.clone()));
            rows.push(row("DynamoDB requests", 0, m.dynamodb.clone()));
            rows.push(row("SQS requests", 0, m.sqs.clone()));
            rows.push(row("other requests (STS, CloudWatch)", 0, m.other.clone()));
            rows.push(row("bytes of HTML", 0, m.bytes.clone()));
        }
        Section {
            title: format!(
                "The web page: {} records and {} dead letters",
                self.records, self.letters
            ),
            ours: "schedkit (`schedkit ui`, the console binary)".into(),
            theirs: theirs.into(),
            rows,
            notes: vec![
                format!(
                    "A stage with {} execution records of the shipped catalog's four jobs (one a minute, one in 50 FAILED) and {} dead letters. `schedkit ui` serves it with every AWS request through the counting forwarder; each page is fetched whole, as a browser fetches it (no asset: one stylesheet, cached).",
                    self.records, self.letters
                ),
                "The overview is `schedkit status`: both queues' depth, CloudWatch's oldest age, the FAILED and PAUSED records (the sparse `open-by-status` index), the cancelled ones, each job's last run (`by-job`, one item), the pauses, the limits and the accountant's ledger. A job's page: its last 50 runs through `by-job` and its pause. The dead letters: every letter read (ten to a receive, never consumed) and made visible again. Nothing scans the table: a Scan fails the run.".into(),
                "Milliseconds by the clock around one HTTP request to the page, against LocalStack on this machine; AWS's latencies differ.".into(),
                "Powertools for AWS Lambda has no web page (nor console): its cells say none.".into(),
            ],
        }
    }
}
