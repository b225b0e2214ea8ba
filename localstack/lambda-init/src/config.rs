//! What an execution environment runs: the function's code, environment and limits, as
//! LocalStack gives them (shared by the environment and the log lines it writes).

use std::path::PathBuf;
use std::time::Duration;

/// What the environment runs, and under which limits.
#[derive(Debug, Clone)]
pub struct FunctionConfig {
    /// The executable (`<code>/bootstrap` for `provided.*` runtimes).
    pub bootstrap: PathBuf,
    /// Working directory and `LAMBDA_TASK_ROOT` (the unzipped code).
    pub task_root: PathBuf,
    /// The function's environment, as the bootstrap should see it (without the init's
    /// own variables; `AWS_LAMBDA_RUNTIME_API` is added here).
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub memory_mb: u32,
    pub version: String,
}
