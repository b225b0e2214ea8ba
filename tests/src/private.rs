//! A LocalStack of a test's own: started by the project's launcher on a free port (so the
//! test may stop it, or treat it as one that something else started), stopped on drop even
//! when an assertion fails first.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The private instance.
pub struct PrivateLocalStack {
    /// Where it listens, on 127.0.0.1.
    pub port: u16,
    /// Who runs its Lambda functions (`SCHEDKIT_LAMBDA_EXECUTOR`).
    executor: &'static str,
}

impl PrivateLocalStack {
    /// Starts one on a free port; panics, failing the test, with the launcher's error.
    pub fn start() -> PrivateLocalStack {
        Self::start_with_executor("schedkit")
    }

    /// [`start`](Self::start) with another Lambda executor: `docker` is stock LocalStack's,
    /// which cannot run a function on a machine without Docker.
    pub fn start_with_executor(executor: &'static str) -> PrivateLocalStack {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let instance = PrivateLocalStack { port, executor };
        let started = instance.launcher("start");
        assert!(
            started.status.success(),
            "launch.sh start: {}",
            String::from_utf8_lossy(&started.stderr)
        );
        instance
    }

    /// Its endpoint, as `AWS_ENDPOINT_URL` takes it.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Where this instance keeps its temporary files (among them the unpacked Lambda code).
    pub fn tmp_dir(&self) -> PathBuf {
        std::env::var("SCHEDKIT_LOCALSTACK_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|_| crate::root().join("localstack/.cache"))
            .join(format!("tmp-{}", self.port))
    }

    /// `localstack/launch.sh <cmd>` for this instance, with the init the tests built.
    pub fn launcher(&self, cmd: &str) -> Output {
        Command::new(crate::root().join("localstack/launch.sh"))
            .arg(cmd)
            .env("LOCALSTACK_PORT", self.port.to_string())
            .env("SCHEDKIT_LAMBDA_EXECUTOR", self.executor)
            .env_remove("AWS_ENDPOINT_URL")
            .env(
                "SCHEDKIT_LAMBDA_INIT",
                crate::target_dir().join("debug/schedkit-lambda-init"),
            )
            .output()
            .expect("launch.sh runs")
    }
}

impl Drop for PrivateLocalStack {
    fn drop(&mut self) {
        self.launcher("stop");
    }
}
