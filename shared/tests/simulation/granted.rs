//! What the workers ask of Step Functions, held against what the stage's template grants
//! the worker's role. LocalStack does not enforce IAM, so a call the role lacks passes
//! every test there and fails only on AWS (the `DescribeExecution` a cancelled run's stop
//! needs was found missing by a reread, not by a test). The world's workers reach Step
//! Functions through [`Recorded`], which notes the IAM action of each call; every seed adds
//! its actions, and [`ungranted`] names those the template's `WorkerChainPolicy` lacks.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use schedkit::aws::AwsError;
use schedkit::orchestrator::{ExecutionInfo, MemoryOrchestrator, Orchestrator, StartError};

type Call<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The IAM actions of the calls made, by name (`states:StartExecution`).
pub type Actions = Arc<Mutex<BTreeSet<&'static str>>>;

/// The world's Step Functions as the workers reach it: each call noted by its IAM action,
/// then made.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub inner: MemoryOrchestrator,
    pub actions: Actions,
}

impl Recorded {
    fn note(&self, action: &'static str) {
        self.actions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(action);
    }
}

impl Orchestrator for Recorded {
    fn start_execution<'a>(
        &'a self,
        machine: &'a str,
        name: &'a str,
        input: &'a str,
    ) -> Call<'a, Result<(), StartError>> {
        self.note("states:StartExecution");
        self.inner.start_execution(machine, name, input)
    }
    fn task_success<'a>(&'a self, token: &'a str, output: &'a str) -> Call<'a, Result<(), String>> {
        self.note("states:SendTaskSuccess");
        self.inner.task_success(token, output)
    }
    fn task_failure<'a>(
        &'a self,
        token: &'a str,
        error: &'a str,
        cause: &'a str,
    ) -> Call<'a, Result<(), String>> {
        self.note("states:SendTaskFailure");
        self.inner.task_failure(token, error, cause)
    }
    fn task_heartbeat<'a>(&'a self, token: &'a str) -> Call<'a, Result<(), String>> {
        self.note("states:SendTaskHeartbeat");
        self.inner.task_heartbeat(token)
    }
    fn describe_execution<'a>(
        &'a self,
        arn: &'a str,
    ) -> Call<'a, Result<Option<ExecutionInfo>, AwsError>> {
        self.note("states:DescribeExecution");
        self.inner.describe_execution(arn)
    }
    fn stop_execution<'a>(
        &'a self,
        arn: &'a str,
        error: &'a str,
        cause: &'a str,
    ) -> Call<'a, Result<(), AwsError>> {
        self.note("states:StopExecution");
        self.inner.stop_execution(arn, error, cause)
    }
    fn redrive_execution<'a>(&'a self, arn: &'a str) -> Call<'a, Result<(), AwsError>> {
        self.note("states:RedriveExecution");
        self.inner.redrive_execution(arn)
    }
    fn find_state_machine<'a>(
        &'a self,
        name: &'a str,
        queue_url: &'a str,
    ) -> Call<'a, schedkit::orchestrator::Found> {
        // SfnOrchestrator lists the state machines, then describes the one named.
        self.note("states:ListStateMachines");
        self.note("states:DescribeStateMachine");
        self.inner.find_state_machine(name, queue_url)
    }
}

/// The Step Functions actions `infra/template.yaml` grants the worker's role: every
/// `states:` action of its `WorkerChainPolicy` resource.
fn granted() -> BTreeSet<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml");
    let template = std::fs::read_to_string(path).expect("infra/template.yaml");
    let (_, policy) = template
        .split_once("\n  WorkerChainPolicy:\n")
        .expect("the template has a WorkerChainPolicy");
    // The resource ends where the next one starts (two spaces, a name).
    let end = policy
        .match_indices("\n  ")
        .find(|(i, _)| {
            policy[i + 3..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
        })
        .map_or(policy.len(), |(i, _)| i);
    policy[..end]
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == ':'))
        .filter(|w| w.starts_with("states:"))
        .map(str::to_string)
        .collect()
}

/// The actions in `called` the template does not grant the worker's role.
pub fn ungranted(called: &BTreeSet<&'static str>) -> Vec<&'static str> {
    let granted = granted();
    called
        .iter()
        .filter(|a| !granted.contains(**a))
        .copied()
        .collect()
}

#[test]
fn the_worker_policy_is_read_from_the_template() {
    let granted = granted();
    assert!(
        granted.contains("states:StartExecution") && granted.contains("states:SendTaskSuccess"),
        "{granted:?}"
    );
    assert!(
        !granted.contains("states:RedriveExecution"),
        "read past the worker's policy: {granted:?}"
    );
}
