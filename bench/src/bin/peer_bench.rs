//! `make bench`: schedkit side by side with Powertools for AWS Lambda (Python; its batch
//! and idempotency utilities as their docs show, `bench/peer/`) on the same LocalStack,
//! alternating so that drift cancels, and its selective DLQ redrive against a one-by-one
//! loop; what a flow-control limit costs in throughput and requests (the peer has none);
//! what the accountant's check costs on a catalog of 300 scheduled jobs, and what the web
//! page's pages cost on a stage of 10,000 records and 300 dead letters (the peer has none);
//! then the cost per million jobs on AWS from what was measured. Writes
//! `bench/results.md` and `bench/results.json` (`bench/chart.py` draws `results.png`).
//!
//! ```text
//! functions/package.sh --release worker && cargo build --release -p schedkit-console --bin schedkit && \
//!   cargo run --release -p schedkit-bench --bin peer-bench -- \
//!     [--deliveries 2000] [--rounds 2] [--cold-starts 5] [--batches 5] [--letters 2000] \
//!     [--flow-runs 300] [--flow-rounds 3] [--backlog-runs 1000] [--urgent-backlog-runs 10000] [--accountant-jobs 300] [--page-records 10000] [--page-letters 300]
//! ```
//! with LocalStack running (`localstack/launch.sh start`; `make bench` does all of it).

use std::path::PathBuf;

use clap::Parser;
use schedkit_bench::cost::{self, PRICES, PRICES_AS_OF, Usage};
use schedkit_bench::head_of_line::{self, Receiving};
use schedkit_bench::lambda_mode::{self, IO_WAIT_SECONDS};
use schedkit_bench::redrive::{self, Redriver};
use schedkit_bench::report::{Better, Results, Row, Section, machine};
use schedkit_bench::sides::{Programs, Side};
use schedkit_bench::stats::median;
use schedkit_bench::throughput::{self, per_delivery};
use schedkit_bench::wire::{TRANSACTION_ITEM, WireCounter};
use schedkit_bench::{accountant, catalog_size, web_page};
use schedkit_bench::{behind_backlog, flow_control};
use schedkit_testkit::{Stack, localstack, unique};

#[derive(Parser)]
struct Args {
    /// Messages sent per throughput run, duplicates included.
    #[arg(long, default_value_t = 2000)]
    deliveries: usize,
    /// Share of the deliveries that repeat an earlier invoice (same key, same payload).
    #[arg(long, default_value_t = 0.2)]
    duplicate_share: f64,
    /// Throughput runs of each side, alternating.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Fresh Lambda environments per side (a cold start each).
    #[arg(long, default_value_t = 5)]
    cold_starts: usize,
    /// Warm batches of each kind per environment.
    #[arg(long, default_value_t = 4)]
    batches: usize,
    /// Dead letters a selective redrive moves.
    #[arg(long, default_value_t = 2000)]
    letters: usize,
    /// Redrives of each side, alternating.
    #[arg(long, default_value_t = 2)]
    redrive_rounds: usize,
    /// Head of line: one-second jobs sent while one long job is in the poller's hand.
    #[arg(long, default_value_t = 500)]
    hol_shorts: usize,
    /// Head of line: how long the long job runs, in seconds.
    #[arg(long, default_value_t = 60)]
    hol_long_seconds: u64,
    /// Head of line: runs of each receiving mode, alternating.
    #[arg(long, default_value_t = 1)]
    hol_rounds: usize,
    /// Flow control: runs of a 50 ms job in each case (no limit, a shared limit, a limit
    /// per tenant); 0 leaves the section out.
    #[arg(long, default_value_t = 300)]
    flow_runs: usize,
    /// Flow control: rounds of the three cases (medians reported).
    #[arg(long, default_value_t = 3)]
    flow_rounds: usize,
    /// Behind a backlog: one-second runs queued before a quiet tenant's run; 0 leaves the
    /// case out.
    #[arg(long, default_value_t = 1000)]
    backlog_runs: usize,
    /// Behind a backlog: one-second runs queued before an urgent run; 0 leaves the case
    /// out.
    #[arg(long, default_value_t = 10_000)]
    urgent_backlog_runs: usize,
    /// The accountant: scheduled (hourly) jobs in the catalog its check reads, with a day
    /// of their runs in the table; 0 leaves the section out.
    #[arg(long, default_value_t = 300)]
    accountant_jobs: usize,
    /// The accountant: checks of each span (5 minutes, a day), alternating.
    #[arg(long, default_value_t = 3)]
    accountant_rounds: usize,
    /// The web page: execution records in the stage its pages read; 0 leaves the
    /// section out.
    #[arg(long, default_value_t = 10_000)]
    page_records: usize,
    /// The web page: dead letters in the stage's DLQ.
    #[arg(long, default_value_t = 300)]
    page_letters: usize,
    /// The web page: fetches of each page, in turn.
    #[arg(long, default_value_t = 3)]
    page_rounds: usize,
    /// A catalog of N jobs: the sizes measured, comma-separated (each with N/10 chains);
    /// 0 leaves the section out.
    #[arg(long, default_value = "10,100,1000", value_delimiter = ',')]
    catalog_sizes: Vec<usize>,
    /// Instead of the benchmark: run schedkit's worker once over `--deliveries` under
    /// `--profiler` and write its profile to this file.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// `callgrind` (instruction counts), `perf` (sampled CPU time) or `none`.
    #[arg(long, default_value = "callgrind")]
    profiler: String,
    /// Which build of the worker to measure: `release` (what ships; `make bench`) or
    /// `debug` (CI's smoke run, which checks that the benchmark still runs end to end).
    #[arg(long, default_value = "release")]
    worker_profile: String,
    /// Where results.md and results.json go.
    #[arg(long, default_value = "bench")]
    out: PathBuf,
    /// A README whose sentence of figures (between `schedkit_bench::headline`'s markers) is
    /// rewritten from these results (`make bench` passes the repository's).
    #[arg(long)]
    readme: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let programs = Programs::locate(&args.worker_profile)?;
    if let Some(out) = &args.profile {
        let sdk = localstack().await;
        let stack = Stack::create(&sdk, &unique("profile"), programs.stack_options()).await?;
        let profiled = schedkit_bench::profile::run(
            &programs,
            &stack,
            args.deliveries,
            args.duplicate_share,
            &args.profiler,
            out,
        )
        .await;
        schedkit_testkit::stack::undeploy_with(&stack.name, &programs.zip).await?;
        return profiled;
    }
    let artifact = programs.zip.clone();
    let peer_artifact = peer_artifact(&programs)?;
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("peer-bench"), programs.stack_options()).await?;
    let wire =
        WireCounter::start(schedkit_testkit::endpoint().trim_start_matches("http://")).await?;
    println!(
        "on {} through a counting forwarder",
        schedkit_testkit::endpoint()
    );

    let t = throughput::run(
        &programs,
        &stack,
        &wire,
        args.deliveries,
        args.duplicate_share,
        args.rounds,
    )
    .await?;
    let lambda = lambda_mode::run(&programs, &stack, args.cold_starts, args.batches).await?;
    let redrives = redrive::run(&sdk, &stack, &wire, args.letters, args.redrive_rounds).await?;
    let hol_plan = head_of_line::Plan {
        shorts: args.hol_shorts,
        short: std::time::Duration::from_secs(1),
        long: std::time::Duration::from_secs(args.hol_long_seconds),
        concurrency: 10,
    };
    let hol = head_of_line::run(&stack, hol_plan, args.hol_rounds).await?;
    let flow = flow_control::run(&stack, &wire, args.flow_runs, args.flow_rounds).await?;
    let backlog = behind_backlog::run(&stack, args.backlog_runs, args.urgent_backlog_runs).await?;
    let accounting =
        accountant::run(&stack, &wire, args.accountant_jobs, args.accountant_rounds).await?;
    let pages = web_page::run(
        &programs.console,
        &stack,
        &wire,
        args.page_records,
        args.page_letters,
        args.page_rounds,
    )
    .await?;
    let catalogs = catalog_size::run(&programs, &stack, &wire, &args.catalog_sizes).await?;

    let n = t.deliveries;
    let records = stack.table.clone();
    let effects = stack.effects_table.clone();
    let units = |side: Side| {
        t.of(side, |r| {
            let (w, _) = cost::capacity_units(&r.counts, |table| {
                r.item_bytes.get(table).copied().unwrap_or(0.0)
            });
            w / n as f64
        })
    };
    let read_units = |side: Side| {
        t.of(side, |r| {
            let (_, rd) = cost::capacity_units(&r.counts, |table| {
                r.item_bytes.get(table).copied().unwrap_or(0.0)
            });
            rd / n as f64
        })
    };
    let dynamodb = |side: Side| t.of(side, |r| per_delivery(r, n, throughput::dynamodb));
    let sqs_requests = |side: Side| t.of(side, |r| per_delivery(r, n, throughput::sqs));
    let both = |f: &dyn Fn(Side) -> Vec<f64>| (f(Side::Schedkit), f(Side::Powertools));
    let row = |name: &str, digits, better, (ours, theirs): (Vec<f64>, Vec<f64>)| {
        Row::new(name, digits, better).samples(ours, theirs)
    };
    let cpu = both(&|s| t.of(s, |r| r.cpu.as_secs_f64() * 1000.0 / n as f64));
    let rss = both(&|s| t.of(s, |r| r.peak_rss_kb as f64 / 1024.0));
    let throughput_section = Section {
        title: format!(
            "{n} deliveries, {:.0} % duplicates, batches of 10 (polling workers)",
            args.duplicate_share * 100.0
        ),
        ours: Side::Schedkit.label().into(),
        theirs: Side::Powertools.label().into(),
        rows: vec![
            row("wall time (s)", 2, Better::Lower, both(&|s| t.of(s, |r| r.wall.as_secs_f64()))),
            row("CPU per delivery (ms)", 3, Better::Lower, cpu.clone()).target(5.0),
            row("peak RSS (MB)", 1, Better::Lower, rss.clone()).target(4.0),
            row("DynamoDB requests per delivery", 2, Better::Lower, both(&dynamodb)).target(1.0),
            row(
                "  of which on the idempotency records",
                2,
                Better::Lower,
                both(&|s| {
                    t.of(s, |r| {
                        per_delivery(r, n, |op, table| op.starts_with("DynamoDB") && table != effects)
                    })
                }),
            ),
            row(
                "  of which effect writes alone (schedkit's ride in its transaction)",
                2,
                Better::Lower,
                both(&|s| {
                    t.of(s, |r| {
                        per_delivery(r, n, |op, table| op.starts_with("DynamoDB") && table == effects)
                    })
                }),
            ),
            row("DynamoDB write units per delivery", 2, Better::Lower, both(&units)),
            row("SQS requests per delivery", 2, Better::Lower, both(&sqs_requests)),
        ],
        notes: vec![
            "Every invoice's effect applied exactly once on both sides, checked after each run.".into(),
            format!(
                "schedkit's DynamoDB requests: a claim per delivery (a duplicate's is refused) and one `TransactWriteItems` per run holding the effect and the DONE record (`{records}`); the peer's: a conditional put and an update of its idempotency record and the effect write, two writes that a crash between them can split (schedkit's reason for the transaction)."
            ),
            "Write units are DynamoDB's billing rule applied to the requests counted and the mean size of the items each table holds after the run: a unit per KB per write (a refused conditional write too), twice that per item of a transaction.".into(),
            "The peer handles a batch's records one after another, as Powertools' default `BatchProcessor` does; schedkit handles them at once. schedkit deletes finished messages as their outcomes become durable, so a worker killed mid-batch leaves only its unfinished ones; hence its extra SQS requests. GetQueueAttributes (both harnesses' drained check) is not counted.".into(),
        ],
    };

    let ms = |m: &std::collections::BTreeMap<Side, Vec<f64>>| {
        (
            m.get(&Side::Schedkit).cloned().unwrap_or_default(),
            m.get(&Side::Powertools).cloned().unwrap_or_default(),
        )
    };
    let size_mb = |p: &std::path::Path| std::fs::metadata(p).map_or(0.0, |m| m.len() as f64 / 1e6);
    let lambda_section = Section {
        title: "As Lambda functions, through the Runtime API (the project's init)".into(),
        ours: "schedkit (bootstrap: the release worker)".into(),
        theirs: "Powertools (awslambdaric, Python 3.13)".into(),
        rows: vec![
            row("cold start: start to first event handled (ms)", 1, Better::Lower, ms(&lambda.cold_start_ms))
                .target(10.0),
            row("  of which init: start to the first poll for an event (ms)", 1, Better::Lower, ms(&lambda.init_ms)),
            row(
                "Max Memory Used after the batches, as Lambda reports it (MB)",
                0,
                Better::Lower,
                ms(&lambda.max_memory_mb),
            ),
            row(
                &format!(
                    "batch latency: 10 I/O-bound jobs, each awaiting {:.0} ms (ms)",
                    IO_WAIT_SECONDS * 1000.0
                ),
                1,
                Better::Lower,
                ms(&lambda.io_batch_ms),
            )
            .target(5.0),
            row(
                "duration per job in a batch of 10 invoices (ms)",
                2,
                Better::Lower,
                ms(&lambda.duration_per_job_ms),
            ),
            row(
                "deployable artifact, zipped (MB)",
                2,
                Better::Lower,
                (vec![size_mb(&artifact)], vec![size_mb(&peer_artifact)]),
            ),
        ],
        notes: vec![
            "The cold start is the bootstrap process's start (the runtime's own, for the peer: Python, then awslambdaric) to its response to the first event (one invoice); AWS adds the download of the code and the sandbox's start to both.".into(),
            "The events are what an SQS event source mapping delivers: messages received from the jobs queue, their receipts live. The I/O-bound jobs are `record-invoice` with `render_seconds` 0.05 on both sides (an awaited sleep in schedkit, `time.sleep` in the peer's record handler, as blocking I/O is in Python).".into(),
            "The peer's artifact is its handler with Powertools and typing_extensions (boto3 and its dependencies come with Lambda's Python runtime, so they are left out, which favours the peer); schedkit's is the `bootstrap` zip `make package` ships, with everything in it.".into(),
        ],
    };

    let redrive_section = Section {
        title: format!("Selective DLQ redrive of {} letters", args.letters),
        ours: Redriver::Schedkit.label().into(),
        theirs: Redriver::OneByOne.label().into(),
        rows: vec![
            row(
                "letters per second",
                0,
                Better::Higher,
                pair(&redrives.letters_per_second),
            )
            .target(20.0),
            row(
                "SQS requests per letter",
                2,
                Better::Lower,
                pair(&redrives.requests_per_letter),
            ),
        ],
        notes: vec![format!(
            "{} letters of `record-invoice` among {} of another job; the others stay. Both send each letter before deleting it and release what they held. schedkit: `SendMessageBatch` and `DeleteMessageBatch` of ten, eight batches at once; the loop: `SendMessage` and `DeleteMessage` per letter (receiving ten at a time).",
            args.letters,
            args.letters / 10
        )],
    };

    let modes = |m: &std::collections::BTreeMap<Receiving, Vec<f64>>| {
        let of = |r| m.get(&r).cloned().unwrap_or_default();
        (of(Receiving::MessageByMessage), of(Receiving::BatchAtATime))
    };
    let slowdown = |r: Receiving| {
        let of = |m: &std::collections::BTreeMap<Receiving, Vec<f64>>| {
            m.get(&r).cloned().unwrap_or_default()
        };
        of(&hol.beside_long)
            .iter()
            .zip(of(&hol.alone))
            .map(|(beside, alone)| beside / alone)
            .collect::<Vec<f64>>()
    };
    let head_of_line_section = Section {
        title: format!(
            "One polling worker: {} one-second jobs beside one {} s job",
            args.hol_shorts, args.hol_long_seconds
        ),
        ours: Receiving::MessageByMessage.label().into(),
        theirs: Receiving::BatchAtATime.label().into(),
        rows: vec![
            row(
                "the short jobs alone: sent to last DONE (s)",
                1,
                Better::Lower,
                modes(&hol.alone),
            ),
            row(
                "the short jobs sent once the long one runs: sent to last DONE (s)",
                1,
                Better::Lower,
                modes(&hol.beside_long),
            ),
            row(
                "beside the long job ÷ alone",
                2,
                Better::Lower,
                (
                    slowdown(Receiving::MessageByMessage),
                    slowdown(Receiving::BatchAtATime),
                ),
            ),
        ],
        notes: vec![format!(
            "One worker, {} messages in hand at most (the worker's default), jobs that sleep, in this process. Message by message, the long job holds one of its {} places, so the short ones run at {}/{} of their rate alone at worst; a batch at a time, they wait for the batch holding the long job to end.",
            hol_plan.concurrency,
            hol_plan.concurrency,
            hol_plan.concurrency - 1,
            hol_plan.concurrency
        )],
    };

    // Cost: Lambda mode's duration per job, the throughput runs' memory and requests.
    let usage = |side: Side| Usage {
        duration_ms: median(&ms(&lambda.duration_per_job_ms).pick(side)),
        memory_mb: cost::memory_setting(median(&t.of(side, |r| r.peak_rss_kb as f64 / 1024.0))),
        invocations: 0.1,
        write_units: median(&units(side)),
        read_units: median(&read_units(side)),
        sqs_requests: median(&sqs_requests(side)),
    };
    let (ours, theirs) = (
        usage(Side::Schedkit).cost_per_million(&PRICES),
        usage(Side::Powertools).cost_per_million(&PRICES),
    );
    let money = |name: &str, f: fn(&cost::Cost) -> f64| {
        Row::new(name, 3, Better::Lower).samples(vec![f(&ours)], vec![f(&theirs)])
    };
    let cost_section = Section {
        title: "Cost per million jobs on AWS (USD)".into(),
        ours: "schedkit".into(),
        theirs: "Powertools".into(),
        rows: vec![
            money("Lambda compute (duration × memory)", |c| c.lambda_compute),
            money("Lambda requests (batches of 10)", |c| c.lambda_requests),
            money("DynamoDB (write and read units)", |c| c.dynamodb),
            money("SQS requests", |c| c.sqs),
            money("total", |c| c.total()).target(3.0),
        ],
        notes: vec![
            PRICES_AS_OF.to_string() + ".",
            format!(
                "Memory: the smallest setting above the peak RSS ({} and {} MB); duration: the batch of 10 invoices above, per job; write units and SQS requests per delivery from the throughput runs ({:.0} % duplicates).",
                usage(Side::Schedkit).memory_mb,
                usage(Side::Powertools).memory_mb,
                args.duplicate_share * 100.0
            ),
        ],
    };

    let results = Results {
        command: format!(
            "make bench (peer-bench --deliveries {} --rounds {} --cold-starts {} --batches {} --letters {} --hol-shorts {} --hol-long-seconds {} --flow-runs {} --flow-rounds {} --backlog-runs {} --urgent-backlog-runs {} --accountant-jobs {} --page-records {} --page-letters {} --catalog-sizes {}{})",
            args.deliveries,
            args.rounds,
            args.cold_starts,
            args.batches,
            args.letters,
            args.hol_shorts,
            args.hol_long_seconds,
            args.flow_runs,
            args.flow_rounds,
            args.backlog_runs,
            args.urgent_backlog_runs,
            args.accountant_jobs,
            args.page_records,
            args.page_letters,
            args.catalog_sizes
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(","),
            if args.worker_profile == "release" {
                String::new()
            } else {
                format!(" --worker-profile {}", args.worker_profile)
            }
        ),
        date: chrono::Utc::now().format("%Y-%m-%d").to_string(),
        machine: machine(),
        // A section whose runs were left out (`--rounds 0`, `--cold-starts 0`,
        // `--redrive-rounds 0`, `--flow-runs 0`, `--accountant-jobs 0`; the cost needs the
        // first two) is not
        // reported.
        sections: [
            throughput_section,
            lambda_section,
            redrive_section,
            head_of_line_section,
            flow.section(Side::Powertools.label()),
            backlog.section(Side::Powertools.label()),
            accounting.section(Side::Powertools.label()),
            pages.section(Side::Powertools.label()),
            catalogs.section(Side::Powertools.label()),
            cost_section,
        ]
        .into_iter()
        .filter(|s| {
            s.rows.iter().all(|r| {
                !r.ours.is_empty() && r.ours.iter().chain(&r.theirs).all(|v| v.is_finite())
            })
        })
        .collect(),
    };
    let markdown = results.markdown();
    println!("\n{markdown}");
    println!("requests by operation and table, last run of each side:");
    for (side, runs) in &t.runs {
        println!("  {}:", side.label());
        let last = runs.last().expect("a run");
        for ((op, table), count) in &last.counts {
            let bytes = last
                .item_bytes
                .get(table)
                .map(|b| format!(" (items {b:.0} B)"))
                .unwrap_or_default();
            let op = if op == TRANSACTION_ITEM {
                op.as_str()
            } else {
                op
            };
            println!("    {op:<40} {table:<50} {count}{bytes}");
        }
    }
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("results.md"), markdown)?;
    std::fs::write(
        args.out.join("results.json"),
        serde_json::to_string_pretty(&results.json())?,
    )?;
    println!(
        "wrote {0}/results.md and {0}/results.json",
        args.out.display()
    );
    if let Some(readme) = &args.readme {
        let text = std::fs::read_to_string(readme)?;
        let rewritten = schedkit_bench::headline::rewrite(&text, &results.json())?;
        std::fs::write(readme, rewritten)?;
        println!("wrote the figures of {}", readme.display());
    }
    schedkit_testkit::stack::undeploy_with(&stack.name, &programs.zip).await?;
    Ok(())
}

/// schedkit's samples and the loop's.
fn pair(m: &std::collections::BTreeMap<Redriver, Vec<f64>>) -> (Vec<f64>, Vec<f64>) {
    (
        m.get(&Redriver::Schedkit).cloned().unwrap_or_default(),
        m.get(&Redriver::OneByOne).cloned().unwrap_or_default(),
    )
}

/// Picks one side of a (schedkit, peer) pair.
trait Pick {
    fn pick(&self, side: Side) -> Vec<f64>;
}

impl Pick for (Vec<f64>, Vec<f64>) {
    fn pick(&self, side: Side) -> Vec<f64> {
        match side {
            Side::Schedkit => self.0.clone(),
            Side::Powertools => self.1.clone(),
        }
    }
}

/// The peer's deployable zip (`bench/peer/package.py`).
fn peer_artifact(programs: &Programs) -> anyhow::Result<PathBuf> {
    let out = std::process::Command::new(&programs.python)
        .arg(programs.peer_dir().join("package.py"))
        .arg(programs.root.join("bench/.cache/powertools-peer.zip"))
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "bench/peer/package.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}
