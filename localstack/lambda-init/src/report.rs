//! The log text Lambda writes around an invocation.

use std::time::Duration;

use crate::config::FunctionConfig;

/// `START`, the function's output, `END` and `REPORT`, as CloudWatch Logs shows them.
pub fn lines(
    request_id: &str,
    config: &FunctionConfig,
    output: &[String],
    duration: Duration,
    init: Option<Duration>,
    max_memory_kb: u64,
    status: Option<&str>,
) -> String {
    let ms = duration.as_secs_f64() * 1000.0;
    let mut text = format!(
        "START RequestId: {request_id} Version: {}\n",
        config.version
    );
    for line in output {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(&format!("END RequestId: {request_id}\n"));
    text.push_str(&format!(
        "REPORT RequestId: {request_id}\tDuration: {ms:.2} ms\tBilled Duration: {} ms\tMemory Size: {} MB\tMax Memory Used: {} MB",
        ms.ceil() as u64,
        config.memory_mb,
        max_memory_kb.div_ceil(1024),
    ));
    if let Some(init) = init {
        text.push_str(&format!(
            "\tInit Duration: {:.2} ms",
            init.as_secs_f64() * 1000.0
        ));
    }
    if let Some(status) = status {
        text.push_str(&format!("\tStatus: {status}"));
    }
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lines_follow_lambdas_format() {
        let config = FunctionConfig {
            bootstrap: "bootstrap".into(),
            task_root: ".".into(),
            env: vec![],
            timeout: Duration::from_secs(3),
            memory_mb: 128,
            version: "$LATEST".into(),
        };
        let text = lines(
            "r-1",
            &config,
            &["hello".into()],
            Duration::from_micros(12_345),
            Some(Duration::from_millis(20)),
            2049,
            None,
        );
        assert_eq!(
            text,
            "START RequestId: r-1 Version: $LATEST\nhello\nEND RequestId: r-1\n\
             REPORT RequestId: r-1\tDuration: 12.35 ms\tBilled Duration: 13 ms\tMemory Size: 128 MB\tMax Memory Used: 3 MB\tInit Duration: 20.00 ms\n"
        );
    }
}
