//! What the worker asks of its process: when to stop, who it is, how much memory it took.

/// Ctrl-C or SIGTERM (what Lambda and container platforms send before stopping).
pub(crate) async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler installs");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// The process's peak resident set size in KiB (Linux; 0 elsewhere), for the stop line.
pub fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Who holds a lease, for operators reading a record: the function and its execution
/// environment (log stream) inside Lambda, the host and process elsewhere.
pub(crate) fn default_worker_id() -> String {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (
        var("AWS_LAMBDA_FUNCTION_NAME"),
        var("AWS_LAMBDA_LOG_STREAM_NAME"),
    ) {
        (Some(function), Some(stream)) => format!("{function}/{stream}"),
        (Some(function), None) => format!("{function}/{}", std::process::id()),
        _ => format!(
            "{}/{}",
            var("HOSTNAME").unwrap_or_else(|| "worker".into()),
            std::process::id()
        ),
    }
}
