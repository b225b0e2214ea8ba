//! schedkit's worker alone over the throughput workload, under a profiler (`peer-bench
//! --profile FILE --profiler callgrind|perf|none`): where its CPU goes, before and after
//! a change.

use std::process::Command;

use schedkit_testkit::Stack;

use crate::sides::Programs;
use crate::throughput::{applied_once, measure, workload};
/// schedkit's side once under a profiler: `callgrind` (instruction counts, stable on a
/// noisy machine, but valgrind hides SHA-NI, so hashing counts as software) or `perf`
/// (sampled CPU time of the real run): `deliveries` envelopes of the same workload, the
/// profile written to `out`.
pub async fn run(
    programs: &Programs,
    stack: &Stack,
    deliveries: usize,
    duplicate_share: f64,
    profiler: &str,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    let (bodies, invoices) = workload(deliveries, duplicate_share, 7);
    stack.reset().await?;
    stack.send_all(bodies.iter().map(String::as_str)).await?;
    let (mut command, report) = match profiler {
        "callgrind" => {
            let mut c = Command::new("valgrind");
            c.arg("--tool=callgrind")
                .arg(format!("--callgrind-out-file={}", out.display()));
            (c, format!("callgrind_annotate {}", out.display()))
        }
        "perf" => {
            let mut c = Command::new("perf");
            c.args(["record", "-F", "4000", "-o"]).arg(out).arg("--");
            (c, format!("perf report -i {} --no-children", out.display()))
        }
        // No profiler: the run's CPU and peak RSS alone, for a quick look.
        "none" => (
            Command::new(&programs.worker),
            "(none: the figures above)".into(),
        ),
        other => anyhow::bail!("--profiler {other}: callgrind, perf or none"),
    };
    if profiler != "none" {
        command.arg(&programs.worker);
    }
    command
        .args(["--until-drained", "--wait-seconds", "1"])
        .envs(stack.worker_env())
        .env("SCHEDKIT_WORKER_ID", "profile");
    let (wall, cpu, peak_rss_kb) = tokio::task::spawn_blocking(move || measure(command)).await??;
    let once = applied_once(stack).await?;
    anyhow::ensure!(
        once == invoices,
        "profiled: {once} of {invoices} invoices applied exactly once"
    );
    println!(
        "profiled {deliveries} deliveries in {:.1} s ({:.3} ms CPU per delivery, peak RSS {:.1} MB, profiler included); read it with: {report}",
        wall.as_secs_f64(),
        cpu.as_secs_f64() * 1000.0 / deliveries as f64,
        peak_rss_kb as f64 / 1024.0
    );
    Ok(())
}
