//! IAM users on LocalStack holding a stage's viewer or operator policy
//! (`infra/localstack-user.sh`): the console run with their keys is refused what the
//! policy does not allow, as on AWS (schedkit's LocalStack checks IAM users' requests, see
//! `localstack/executor-plugin`).

use anyhow::Context;
use schedkit::iac::roles::{self, On, Role};
use serde::Deserialize;

use crate::stack::Stack;

/// An IAM user and its access key.
#[derive(Debug, Clone, Deserialize)]
pub struct User {
    pub user: String,
    pub arn: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    /// A role's session has one; a user's key none.
    #[serde(default)]
    pub session_token: Option<String>,
}

impl User {
    /// The user `name` (created if new) holding `policies`: managed policies' ARNs, or
    /// policy documents (JSON), each made a managed policy of the user's own.
    pub async fn holding(name: &str, policies: &[String]) -> anyhow::Result<User> {
        let mut args = vec![name];
        args.extend(policies.iter().map(String::as_str));
        script(&args).await
    }

    /// A session of the role `name` (created if new) holding `policies` (managed policy
    /// ARNs): how people working through SSO act.
    pub async fn assuming(name: &str, policies: &[String]) -> anyhow::Result<User> {
        let mut args = vec!["--role", name];
        args.extend(policies.iter().map(String::as_str));
        script(&args).await
    }

    /// Every decision LocalStack took on this user's requests, in order.
    pub async fn decisions(&self) -> anyhow::Result<Vec<Decision>> {
        script(&["--decisions", &self.user]).await
    }

    /// The variables that make a process (the console) sign its requests as this user.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let mut vars = vec![
            ("AWS_ACCESS_KEY_ID", self.access_key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_access_key.clone()),
            ("AWS_REGION", "us-east-1".into()),
        ];
        if let Some(token) = &self.session_token {
            vars.push(("AWS_SESSION_TOKEN", token.clone()));
        }
        vars
    }
}

/// `infra/localstack-user.sh args`, its JSON output read as `T`.
async fn script<T: serde::de::DeserializeOwned>(args: &[&str]) -> anyhow::Result<T> {
    let out = tokio::process::Command::new(crate::root().join("infra/localstack-user.sh"))
        .args(args)
        .env("AWS_ENDPOINT_URL", crate::endpoint())
        .output()
        .await
        .context("running infra/localstack-user.sh")?;
    anyhow::ensure!(
        out.status.success(),
        "localstack-user.sh {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).context("reading localstack-user.sh's output")
}

/// What LocalStack decided on one action of one request.
#[derive(Debug, Clone, Deserialize)]
pub struct Decision {
    pub action: String,
    pub resource: String,
    pub allowed: bool,
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Viewer => "viewer",
        Role::Operator => "operator",
    }
}

/// The ARN of a deployed stage's policy for `role` (LocalStack's account).
pub fn policy_arn(stage: &str, role: Role) -> String {
    format!(
        "arn:aws:iam::000000000000:policy/{}",
        role.policy_name(stage)
    )
}

/// A user of `stack` holding its policy for `role`: a deployed stage's own (the template's,
/// as CloudFormation made it), or for a lane the same grants over the lane's queues and
/// tables and the shared stage's schedule group, chains and roles.
pub async fn user_of(stack: &Stack, role: Role) -> anyhow::Result<User> {
    let name = format!("{}-{}", stack.name, role_name(role));
    if !stack.lane {
        return User::holding(&name, &[policy_arn(&stack.name, role)]).await;
    }
    let document = roles::document(role, |on| lane_arns(stack, on));
    User::holding(&name, &[document.to_string()]).await
}

/// The ARNs of a lane's resources of one kind.
fn lane_arns(stack: &Stack, on: On) -> Vec<String> {
    const REGION: &str = "us-east-1:000000000000";
    let group = &stack.schedule_group;
    let machines = stack.state_machine_prefix();
    match on {
        On::Table => vec![format!("arn:aws:dynamodb:{REGION}:table/{}", stack.table)],
        On::TableIndexes => vec![format!(
            "arn:aws:dynamodb:{REGION}:table/{}/index/*",
            stack.table
        )],
        // The jobs queue and the urgent queue beside it, as the template grants them.
        On::JobsQueue => vec![
            stack.arn_of(&stack.queue_url),
            stack.arn_of(&stack.urgent_queue_url()),
        ],
        On::DeadLetterQueue => vec![stack.arn_of(&stack.dlq_url)],
        On::ScheduleGroups => vec![
            format!("arn:aws:scheduler:{REGION}:schedule-group/{group}"),
            format!("arn:aws:scheduler:{REGION}:schedule-group/{group}-once"),
        ],
        On::Schedules => vec![
            format!("arn:aws:scheduler:{REGION}:schedule/{group}/*"),
            format!("arn:aws:scheduler:{REGION}:schedule/{group}-once/*"),
        ],
        On::ChainMachines => vec![format!("{machines}*")],
        On::ChainExecutions => vec![format!(
            "{}*",
            machines.replacen(":stateMachine:", ":execution:", 1)
        )],
        On::SchedulerRole => vec![stack.scheduler_role_arn.clone()],
        // A lane's catalog is the demo's, which has chains.
        On::StageAlarms => schedkit::ops::alarms::names(&stack.name, true)
            .into_iter()
            .map(|name| format!("arn:aws:cloudwatch:{REGION}:alarm:{name}"))
            .collect(),
        On::Anything => vec!["*".into()],
    }
}
