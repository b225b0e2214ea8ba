//! The two sides of the Powertools comparison, and where their programs are.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;
use schedkit_testkit::{StackOptions, WorkerBuild};

/// Who is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    Schedkit,
    Powertools,
}

impl Side {
    pub fn label(self) -> &'static str {
        match self {
            Side::Schedkit => "schedkit (Rust, release)",
            Side::Powertools => "Powertools 3.37.0 (Python 3.13)",
        }
    }

    /// Both sides, `round` deciding who goes first (alternating, so that drift cancels).
    pub fn order(round: usize) -> [Side; 2] {
        if round.is_multiple_of(2) {
            [Side::Schedkit, Side::Powertools]
        } else {
            [Side::Powertools, Side::Schedkit]
        }
    }
}

/// The programs: schedkit's worker (the release build: what ships) and the peer's
/// virtualenv.
#[derive(Debug, Clone)]
pub struct Programs {
    pub root: PathBuf,
    /// `target/<profile>/worker`.
    pub worker: PathBuf,
    /// `functions/package.sh`'s zip of it: what a stage deploys.
    pub zip: PathBuf,
    /// `target/<profile>/schedkit`: the console, for its web page.
    pub console: PathBuf,
    /// The peer virtualenv's Python (Powertools and awslambdaric installed).
    pub python: PathBuf,
}

impl Programs {
    /// Finds the worker of `profile` (`release`; CI's smoke run uses `debug`) and its zip,
    /// refusing without them, and installs the peer if needed.
    pub fn locate(profile: &str) -> anyhow::Result<Programs> {
        let root = schedkit_testkit::root();
        let target = schedkit_testkit::target_dir();
        let worker = target.join(profile).join("worker");
        let zip = target.join("lambda").join(profile).join("worker.zip");
        let console = target.join(profile).join("schedkit");
        let package = if profile == "release" {
            "functions/package.sh --release worker"
        } else {
            "functions/package.sh worker"
        };
        for path in [&worker, &zip] {
            anyhow::ensure!(
                path.exists(),
                "{} is missing: {package} (make bench does)",
                path.display()
            );
        }
        anyhow::ensure!(
            console.exists(),
            "{} is missing: cargo build -p schedkit-console --bin schedkit{} (make bench does)",
            console.display(),
            if profile == "release" {
                " --release"
            } else {
                ""
            }
        );
        let out = Command::new(root.join("bench/peer/install.sh"))
            .output()
            .context("installing the peer (bench/peer/install.sh)")?;
        anyhow::ensure!(
            out.status.success(),
            "bench/peer/install.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let python = PathBuf::from(String::from_utf8(out.stdout)?.trim());
        Ok(Programs {
            root,
            worker,
            zip,
            console,
            python,
        })
    }

    /// `bench/peer/`, the peer's code.
    pub fn peer_dir(&self) -> PathBuf {
        self.root.join("bench/peer")
    }

    /// A stage for the benchmark: the template deployed with this worker's zip (the
    /// function does not consume the queue; each side's process does).
    pub fn stack_options(&self) -> StackOptions {
        StackOptions {
            worker: Some(WorkerBuild {
                template: self.root.join("infra/template.yaml"),
                zip: self.zip.clone(),
            }),
            ..StackOptions::default()
        }
    }
}
