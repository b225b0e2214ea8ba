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

/// The programs: schedkit's release worker and the peer's virtualenv.
#[derive(Debug, Clone)]
pub struct Programs {
    pub root: PathBuf,
    /// `target/release/worker`.
    pub worker: PathBuf,
    /// The peer virtualenv's Python (Powertools and awslambdaric installed).
    pub python: PathBuf,
}

impl Programs {
    /// Finds the release worker (refusing without it) and installs the peer if needed.
    pub fn locate() -> anyhow::Result<Programs> {
        let root = schedkit_testkit::root();
        let worker = schedkit_testkit::target_dir().join("release/worker");
        anyhow::ensure!(
            worker.exists(),
            "{} is missing: cargo build --release --bin worker (make bench does)",
            worker.display()
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
            python,
        })
    }

    /// `bench/peer/`, the peer's code.
    pub fn peer_dir(&self) -> PathBuf {
        self.root.join("bench/peer")
    }
}

/// A stage for the benchmark: the template deployed with the release worker's zip (the
/// function does not consume the queue; each side's process does).
pub fn stack_options() -> anyhow::Result<StackOptions> {
    let zip = release_zip();
    anyhow::ensure!(
        zip.exists(),
        "{} is missing: functions/package.sh --release worker (make bench does)",
        zip.display()
    );
    Ok(StackOptions {
        worker: Some(WorkerBuild {
            template: schedkit_testkit::root().join("infra/template.yaml"),
            zip,
        }),
        ..StackOptions::default()
    })
}

/// `functions/package.sh --release worker`'s zip: what `make package` ships.
pub fn release_zip() -> PathBuf {
    schedkit_testkit::target_dir().join("lambda/release/worker.zip")
}
