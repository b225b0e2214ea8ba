//! Step Functions' part in the simulated world. Each execution the worker starts runs its
//! chain's stages as the generated state machine does (`schedkit::iac::chain_definition`):
//! a stage's steps sent to the jobs queue, each carrying a task token; the next stage once
//! every step of this one succeeded; then the run's end sent as a message, `done`, or
//! `paused` with the stage's results as soon as a stage has a failed step. The first answer
//! to a token is the one Step Functions takes; later ones are ignored.

use std::collections::BTreeMap;

use schedkit::catalog::Chain;
use schedkit::orchestrator::{Answer, MemoryOrchestrator};
use serde_json::{Value, json};

/// One execution as the state machine runs it.
#[derive(Debug)]
struct Execution {
    chain: String,
    key: String,
    scheduled_for: Value,
    payload: Value,
    /// The stage running now.
    stage: usize,
    /// Its steps' tasks: (step, token).
    tasks: Vec<(String, String)>,
}

/// Plays the state machines of the catalog's chains over the memory orchestrator.
#[derive(Debug)]
pub struct Conductor {
    orchestrator: MemoryOrchestrator,
    chains: BTreeMap<String, Chain>,
    running: BTreeMap<String, Execution>,
    tokens: u64,
    /// Every task token handed out, with its step's key.
    pub tasks: BTreeMap<String, String>,
}

/// A message the state machine sends: what it is (for the trace) and its body.
pub struct Sends {
    pub what: String,
    pub body: String,
}

impl Conductor {
    pub fn new(orchestrator: MemoryOrchestrator, chains: BTreeMap<String, Chain>) -> Self {
        Conductor {
            orchestrator,
            chains,
            running: BTreeMap::new(),
            tokens: 0,
            tasks: BTreeMap::new(),
        }
    }

    /// Whether every execution started has ended.
    pub fn idle(&self) -> bool {
        self.running.is_empty() && self.started_unseen().is_empty()
    }

    fn started_unseen(&self) -> Vec<(String, String, String)> {
        let state = self.orchestrator.lock();
        state
            .executions
            .iter()
            .filter(|(name, _)| !self.running.contains_key(*name) && !state.closed.contains(*name))
            .map(|(name, (machine, input))| (name.clone(), machine.clone(), input.clone()))
            .collect()
    }

    /// One turn of every state machine: new executions send their first stage, stages
    /// whose tasks are all answered go on or end. What to send, in order.
    pub fn turn(&mut self) -> Vec<Sends> {
        let mut out = Vec::new();
        // An execution an operator stopped (`chains cancel`) sends nothing more.
        {
            let state = self.orchestrator.lock();
            self.running
                .retain(|name, _| !state.stopped.contains_key(name));
        }
        for (name, machine, input) in self.started_unseen() {
            let input: Value = serde_json::from_str(&input).expect("the worker's input is JSON");
            let chain = machine.trim_start_matches("machine:").to_string();
            let mut execution = Execution {
                chain,
                key: input["chain_key"].as_str().unwrap_or_default().to_string(),
                scheduled_for: input["scheduled_for"].clone(),
                payload: input["payload"].clone(),
                stage: 0,
                tasks: Vec::new(),
            };
            out.extend(self.send_stage(&mut execution));
            self.running.insert(name, execution);
        }
        let names: Vec<String> = self.running.keys().cloned().collect();
        for name in names {
            let Some(results) = self.stage_results(&name) else {
                continue;
            };
            let mut execution = self.running.remove(&name).expect("listed");
            let failed = results.iter().any(|r| r.get("failed").is_some());
            let last = self.chains[&execution.chain].stages.len() - 1;
            if !failed && execution.stage < last {
                execution.stage += 1;
                out.extend(self.send_stage(&mut execution));
                self.running.insert(name, execution);
                continue;
            }
            let outcome = if failed { "paused" } else { "done" };
            out.push(end_message(&execution, &name, outcome, results));
            self.orchestrator.lock().closed.push(name);
        }
        out
    }

    /// The results of the execution's stage once every task is answered.
    fn stage_results(&self, name: &str) -> Option<Vec<Value>> {
        let execution = &self.running[name];
        let state = self.orchestrator.lock();
        let first = |token: &str| {
            state
                .answers
                .iter()
                .find(|(t, _)| t == token)
                .map(|(_, a)| a.clone())
        };
        execution
            .tasks
            .iter()
            .map(|(step, token)| {
                Some(match first(token)? {
                    Answer::Succeeded(_) => json!({ "step": step }),
                    Answer::Failed { error, cause } => json!({
                        "step": step, "failed": true,
                        "failure": { "Error": error, "Cause": cause },
                    }),
                })
            })
            .collect()
    }

    fn send_stage(&mut self, execution: &mut Execution) -> Vec<Sends> {
        let chain = &self.chains[&execution.chain];
        let mut out = Vec::new();
        execution.tasks.clear();
        for step in &chain.stages[execution.stage].steps {
            self.tokens += 1;
            let token = format!("token-{}", self.tokens);
            self.orchestrator.lock().waiting.push(token.clone());
            let key = format!("{}#{}", execution.key, step.name);
            self.tasks.insert(token.clone(), key.clone());
            let body = json!({
                "job": step.job,
                "scheduled_for": execution.scheduled_for,
                "key": key,
                "payload": Value::Object(step.payload.clone()),
                "chain": {
                    "name": chain.name,
                    "key": execution.key,
                    "step": step.name,
                    "input": execution.payload,
                    "task_token": token,
                },
            });
            out.push(Sends {
                what: format!("step {key} ({token})"),
                body: body.to_string(),
            });
            execution.tasks.push((step.name.clone(), token));
        }
        out
    }
}

/// The run's end as the `done` or `paused` state sends it.
fn end_message(execution: &Execution, name: &str, outcome: &str, stage: Vec<Value>) -> Sends {
    let mut chain = json!({
        "name": execution.chain,
        "key": execution.key,
        "outcome": outcome,
        "execution": name,
    });
    if outcome == "paused" {
        chain["stage"] = Value::Array(stage);
    }
    let body = json!({
        "job": execution.chain,
        "scheduled_for": execution.scheduled_for,
        "chain": chain,
    });
    Sends {
        what: format!("{} {outcome} ({name})", execution.key),
        body: body.to_string(),
    }
}
