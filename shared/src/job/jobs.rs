//! The jobs a worker implements, bound to the catalog's policies.
//!
//! Code says *what* a job does, the catalog *how* it is run (attempts, backoff, lease, key
//! template). Binding the two is where a mismatch is caught: a queue job in the catalog
//! without an implementation would fail every run, so the worker refuses to start instead.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;

use super::handler::{Bound, Handler, Job};
use super::{JobPolicy, RegisteredJob, Registry};
use crate::catalog::{Catalog, Target};

/// Job implementations by catalog name, before their policies are known, with the state
/// their [`State`](super::State) arguments are cloned from (`()` when there is none).
#[derive(Clone)]
pub struct Jobs<S = ()> {
    state: S,
    jobs: BTreeMap<String, Arc<dyn Job>>,
}

impl Default for Jobs<()> {
    fn default() -> Self {
        Jobs::new()
    }
}

/// Why a worker's jobs do not fit its catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// A queue job of the catalog that no implementation was registered for: every run
    /// of it would fail.
    #[error(
        "{file}: job `{job}` targets the queue but the worker has no implementation `{handler}` for it (register it with `Jobs::add`, or name another with the job's `handler`)"
    )]
    Unimplemented {
        /// The catalog.
        file: String,
        /// The job's name in it.
        job: String,
        /// The implementation it names (its `handler`, else its own name).
        handler: String,
    },
}

impl Jobs<()> {
    /// No job and no state yet; [`Jobs::add`] each job.
    pub fn new() -> Self {
        Jobs::with_state(())
    }
}

impl<S: Clone + Send + Sync + 'static> Jobs<S> {
    /// No job yet; every job's `State<T>` arguments are taken from `state` (built once:
    /// SDK clients, table names), `T` being `S` itself or any part with [`FromRef`](super::FromRef).
    pub fn with_state(state: S) -> Self {
        Jobs {
            state,
            jobs: BTreeMap::new(),
        }
    }

    /// Adds (or replaces) the implementation of the catalog job `name`: any `async fn`
    /// whose arguments are extractors and whose result is `Result<impl Serialize, E>`.
    pub fn add<H, T>(mut self, name: impl Into<String>, handler: H) -> Self
    where
        H: Handler<T, S>,
        T: 'static,
    {
        let bound = Bound {
            handler,
            state: self.state.clone(),
            args: PhantomData,
        };
        self.jobs.insert(name.into(), Arc::new(bound));
        self
    }

    /// The registry the batch adapter runs: every catalog job that targets the queue, with
    /// its catalog policy and the implementation it names (`handler`, else its own name;
    /// many jobs may share one), or its `command`, which needs none. Implementations no job names are left out with a warning
    /// (nothing can fire them).
    pub fn bind(self, catalog: &Catalog) -> Result<Registry, BindError> {
        let mut registry = Registry::default();
        let mut used = std::collections::BTreeSet::new();
        for job in catalog.jobs.values().filter(|j| j.target == Target::Queue) {
            if let Some(command) = &job.spec.command {
                // A command job needs no implementation: its run is the process.
                let run: Arc<dyn Job> = Arc::new(super::command::CommandJob::new(command.clone()));
                registry.insert(
                    job.name.clone(),
                    RegisteredJob {
                        job: run,
                        policy: job.policy.clone(),
                        secrets: Arc::new(job.spec.secrets.clone()),
                    },
                );
                continue;
            }
            let handler = job.handler();
            let run = self
                .jobs
                .get(handler)
                .cloned()
                .ok_or_else(|| BindError::Unimplemented {
                    file: catalog.file.clone(),
                    job: job.name.clone(),
                    handler: handler.to_string(),
                })?;
            used.insert(handler);
            registry.insert(
                job.name.clone(),
                RegisteredJob {
                    job: run,
                    policy: job.policy.clone(),
                    secrets: Arc::new(job.spec.secrets.clone()),
                },
            );
        }
        for name in self.jobs.keys().filter(|n| !used.contains(n.as_str())) {
            tracing::warn!(
                job = name,
                catalog = catalog.file,
                "implemented job is not the handler of any queue job of the catalog; it will never run"
            );
        }
        Ok(registry)
    }

    /// A registry without a catalog, each job run with `policy(name)`: for tools and tests
    /// that set policies in code. A worker binds to its catalog ([`Jobs::bind`]).
    pub fn bind_policies(self, policy: impl Fn(&str) -> JobPolicy) -> Registry {
        let mut registry = Registry::default();
        for (name, job) in self.jobs {
            let policy = policy(&name);
            registry.insert(
                name,
                RegisteredJob {
                    job,
                    policy,
                    secrets: Arc::default(),
                },
            );
        }
        registry
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobError;

    async fn noop() -> Result<(), JobError> {
        Ok(())
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
            "c.toml: job `mystery` targets the queue but the worker has no implementation `mystery` for it (register it with `Jobs::add`, or name another with the job's `handler`)"
        );
    }

    #[test]
    fn jobs_naming_one_handler_share_its_implementation_each_with_its_own_policy() {
        let catalog = Catalog::parse(
            "[jobs.sync-a]\nowner = \"ops\"\nhandler = \"sync\"\nlease_seconds = 7\n[jobs.sync-b]\nowner = \"ops\"\nhandler = \"sync\"\n[jobs.alone]\nowner = \"ops\"\nhandler = \"missing\"\n",
            "c.toml",
        )
        .unwrap();
        let error = Jobs::new().add("sync", noop).bind(&catalog).err().unwrap();
        assert_eq!(
            error,
            BindError::Unimplemented {
                file: "c.toml".into(),
                job: "alone".into(),
                handler: "missing".into()
            }
        );
        let two = Catalog::parse(
            "[jobs.sync-a]\nowner = \"ops\"\nhandler = \"sync\"\nlease_seconds = 7\n[jobs.sync-b]\nowner = \"ops\"\nhandler = \"sync\"\n",
            "c.toml",
        )
        .unwrap();
        let registry = Jobs::new().add("sync", noop).bind(&two).unwrap();
        assert_eq!(registry.get("sync-a").unwrap().policy.lease.as_secs(), 7);
        assert_eq!(registry.get("sync-b").unwrap().policy.lease.as_secs(), 60);
        assert!(registry.get("sync").is_none(), "a handler is not a job");
    }
}
