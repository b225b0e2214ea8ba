//! The jobs a worker implements, bound to the catalog's policies.
//!
//! Code says *what* a job does, the catalog *how* it is run (attempts, backoff, lease, key
//! template). Binding the two is where a mismatch is caught: a queue job in the catalog
//! without an implementation would fail every run, so the worker refuses to start instead.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::catalog::{Catalog, Target};
use crate::{Job, Registry};

/// Job implementations by catalog name, before their policies are known.
#[derive(Clone, Default)]
pub struct Jobs {
    jobs: BTreeMap<String, Arc<dyn Job>>,
}

/// Why a worker's jobs do not fit its catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// A queue job of the catalog that no implementation was registered for: every run
    /// of it would fail.
    #[error(
        "{file}: job `{job}` targets the queue but the worker has no implementation for it (register it with `Jobs::add`)"
    )]
    Unimplemented {
        /// The catalog.
        file: String,
        /// The job's name in it.
        job: String,
    },
}

impl Jobs {
    /// No job yet; [`Jobs::add`] each one.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the implementation of the catalog job `name`.
    pub fn add(self, name: impl Into<String>, job: impl Job) -> Self {
        self.add_shared(name, Arc::new(job))
    }

    /// Adds (or replaces) an implementation already behind an `Arc`.
    pub fn add_shared(mut self, name: impl Into<String>, job: Arc<dyn Job>) -> Self {
        self.jobs.insert(name.into(), job);
        self
    }

    /// The registry the batch adapter runs: every catalog job that targets the queue, with
    /// its catalog policy. Implementations the catalog does not list are left out with a
    /// warning (nothing can fire them).
    pub fn bind(mut self, catalog: &Catalog) -> Result<Registry, BindError> {
        let mut registry = Registry::new();
        for job in catalog.jobs.values().filter(|j| j.target == Target::Queue) {
            let run = self
                .jobs
                .remove(&job.name)
                .ok_or_else(|| BindError::Unimplemented {
                    file: catalog.file.clone(),
                    job: job.name.clone(),
                })?;
            registry = registry.register_shared(job.name.clone(), job.policy.clone(), run);
        }
        for name in self.jobs.keys() {
            tracing::warn!(
                job = name,
                catalog = catalog.file,
                "implemented job is not a queue job of the catalog; it will never run"
            );
        }
        Ok(registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{JobContext, JobResult};

    async fn noop(_ctx: JobContext) -> JobResult {
        Ok(serde_json::Value::Null)
    }

    #[test]
    fn every_queue_job_is_bound_with_its_catalog_policy() {
        let catalog = Catalog::parse(
            "[jobs.a]\nowner = \"ops\"\nlease_seconds = 7\n[jobs.b]\nowner = \"ops\"\n",
            "c.toml",
        )
        .unwrap();
        let registry = Jobs::new()
            .add("a", noop)
            .add("b", noop)
            .bind(&catalog)
            .unwrap();
        for job in catalog.jobs.values() {
            let bound = registry.get(&job.name).expect("registered");
            assert_eq!(bound.policy.lease, job.policy.lease, "{}", job.name);
            assert_eq!(bound.policy.retry, job.policy.retry, "{}", job.name);
        }
        assert_eq!(registry.get("a").unwrap().policy.lease.as_secs(), 7);
    }

    #[test]
    fn a_catalog_job_without_implementation_is_refused() {
        let catalog = Catalog::parse("[jobs.mystery]\nowner = \"ops\"\n", "c.toml").unwrap();
        let error = Jobs::new().add("other", noop).bind(&catalog).err().unwrap();
        assert_eq!(
            error.to_string(),
            "c.toml: job `mystery` targets the queue but the worker has no implementation for it (register it with `Jobs::add`)"
        );
    }
}
