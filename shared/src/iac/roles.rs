//! The stage's two managed policies, `schedkit-<stage>-viewer` and
//! `schedkit-<stage>-operator`, and the one table both are written from: every AWS action
//! the console (and the web page) performs on a stage, on which of the stage's resources,
//! and which policy grants it.
//!
//! The viewer may read everything an operator looks at and change nothing: no action whose
//! IAM access level is Write, and not `sqs:ReceiveMessage` either, though AWS classes it a
//! read: SQS has no way to look at a message without receiving it, a receive hides the
//! message for as long as the receiver asks (up to 12 hours, out of every redrive's and
//! alarm's sight), and no condition key limits that. So the dead letters' bodies are the
//! operator's (`dlq list/show`); a viewer sees the DLQ's depth (`status`) and the FAILED
//! runs with their errors (`executions list --status failed`).
//!
//! The operator policy is the viewer's plus exactly the console's actions that change
//! state, each on the resources the console changes. `schedkit engine` is not among them:
//! it fires schedules where nothing else does (LocalStack); on AWS the scheduler fires them.
//!
//! The same table names the policy a refused action needs: [`refusal_hint`] turns AWS's
//! AccessDenied message into "attach this policy".

use std::fmt::Write;

use crate::catalog::Catalog;

/// Who a policy is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Looks: every read, nothing that changes state.
    Viewer,
    /// Acts: the viewer's reads and the console's actions.
    Operator,
}

impl Role {
    /// The managed policy's name on a stage.
    pub fn policy_name(self, stage: &str) -> String {
        match self {
            Role::Viewer => format!("schedkit-{stage}-viewer"),
            Role::Operator => format!("schedkit-{stage}-operator"),
        }
    }

    fn logical_id(self) -> &'static str {
        match self {
            Role::Viewer => "ViewerPolicy",
            Role::Operator => "OperatorPolicy",
        }
    }
}

/// A resource of the stage, as the template names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    /// The executions table.
    Table,
    /// The executions table's indexes (`by-job`, `open-by-status`, `by-shard`).
    TableIndexes,
    /// The jobs queues: the function's, and the host jobs' (`runs_on = "host"`).
    JobsQueue,
    /// The jobs' dead-letter queue.
    DeadLetterQueue,
    /// The stage's schedule group, and the group of one-off runs beside it (`<group>-once`).
    ScheduleGroups,
    /// The schedules in either group.
    Schedules,
    /// Every chain's state machine.
    ChainMachines,
    /// Every chain's executions.
    ChainExecutions,
    /// The role EventBridge Scheduler sends with (passed with every schedule written).
    SchedulerRole,
    /// The stage's alarms over every job, and its failure storm's.
    StageAlarms,
    /// No resource: the action has no resource-level permissions.
    Anything,
}

/// Actions on resources, granted to a role, and why the console needs them.
#[derive(Debug, Clone, Copy)]
pub struct Grant {
    /// The least role that holds it (the operator holds every viewer grant too).
    pub role: Role,
    /// The statement's id in the policy.
    pub sid: &'static str,
    /// IAM actions, `service:Action`.
    pub actions: &'static [&'static str],
    /// What they act on.
    pub on: &'static [On],
    /// The commands that use them.
    pub used_by: &'static str,
}

/// Every grant of both policies. Batch APIs are authorized by their single form
/// (`SendMessageBatch` by `sqs:SendMessage`); `sts:GetCallerIdentity` (the audit trail's
/// identity) needs no permission.
pub const GRANTS: &[Grant] = &[
    Grant {
        role: Role::Viewer,
        sid: "ReadRecords",
        actions: &[
            "dynamodb:GetItem",
            "dynamodb:BatchGetItem",
            "dynamodb:Query",
        ],
        on: &[On::Table, On::TableIndexes],
        used_by: "status, jobs, executions list/show, chains list/show, audit",
    },
    Grant {
        role: Role::Viewer,
        sid: "ReadQueues",
        actions: &["sqs:GetQueueUrl", "sqs:GetQueueAttributes"],
        on: &[On::JobsQueue, On::DeadLetterQueue],
        used_by: "finding the stage's queues; status (depths)",
    },
    Grant {
        role: Role::Viewer,
        sid: "ReadSchedules",
        actions: &[
            "scheduler:GetSchedule",
            "scheduler:GetScheduleGroup",
            "scheduler:ListTagsForResource",
        ],
        on: &[On::ScheduleGroups, On::Schedules],
        used_by: "schedules sync --dry-run, fire (the group's wiring)",
    },
    Grant {
        role: Role::Viewer,
        sid: "ListSchedules",
        actions: &["scheduler:ListSchedules"],
        on: &[On::Anything],
        used_by: "schedules sync --dry-run",
    },
    Grant {
        role: Role::Viewer,
        sid: "ReadMetrics",
        actions: &["cloudwatch:GetMetricStatistics"],
        on: &[On::Anything],
        used_by: "status (the oldest message's age, limits held back)",
    },
    Grant {
        role: Role::Viewer,
        sid: "ReadAlarms",
        actions: &[
            "cloudwatch:DescribeAlarms",
            "cloudwatch:DescribeAlarmContributors",
        ],
        on: &[On::StageAlarms],
        used_by: "status (the alarms in ALARM and the jobs they name)",
    },
    Grant {
        role: Role::Viewer,
        sid: "ReadChainExecutions",
        actions: &["states:DescribeExecution"],
        on: &[On::ChainExecutions],
        used_by: "chains show",
    },
    Grant {
        role: Role::Operator,
        sid: "WriteRecords",
        actions: &[
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
        ],
        on: &[On::Table],
        used_by: "the audit trail; executions cancel; chains rerun/cancel/skip; jobs pause/resume",
    },
    Grant {
        role: Role::Operator,
        sid: "SendRuns",
        actions: &["sqs:SendMessage"],
        on: &[On::JobsQueue],
        used_by: "fire, schedules backfill, dlq redrive",
    },
    Grant {
        role: Role::Operator,
        sid: "HandleMessages",
        actions: &[
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:ChangeMessageVisibility",
        ],
        on: &[On::JobsQueue, On::DeadLetterQueue],
        used_by: "dlq list/show/redrive/purge; executions cancel of queued runs",
    },
    Grant {
        role: Role::Operator,
        sid: "MoveDeadLetters",
        actions: &["sqs:StartMessageMoveTask", "sqs:ListMessageMoveTasks"],
        on: &[On::DeadLetterQueue],
        used_by: "dlq redrive of every letter",
    },
    Grant {
        role: Role::Operator,
        sid: "WriteSchedules",
        actions: &[
            "scheduler:CreateSchedule",
            "scheduler:UpdateSchedule",
            "scheduler:DeleteSchedule",
            "scheduler:CreateScheduleGroup",
        ],
        on: &[On::ScheduleGroups, On::Schedules],
        used_by: "schedules sync, jobs pause/resume, fire --at (a one-off schedule)",
    },
    Grant {
        role: Role::Operator,
        sid: "PassTheSchedulersRole",
        actions: &["iam:PassRole"],
        on: &[On::SchedulerRole],
        used_by: "every schedule written carries the scheduler's role",
    },
    Grant {
        role: Role::Operator,
        sid: "StartChains",
        actions: &["states:StartExecution"],
        on: &[On::ChainMachines],
        used_by: "chains rerun/skip",
    },
    Grant {
        role: Role::Operator,
        sid: "ControlChainExecutions",
        actions: &["states:StopExecution", "states:RedriveExecution"],
        on: &[On::ChainExecutions],
        used_by: "chains cancel, chains rerun --redrive",
    },
];

/// The least role that holds `action` (IAM actions are case-insensitive), or None when
/// neither policy grants it.
pub fn granted_by(action: &str) -> Option<Role> {
    GRANTS
        .iter()
        .filter(|g| g.actions.iter().any(|a| a.eq_ignore_ascii_case(action)))
        .map(|g| g.role)
        .min()
}

/// The action AWS refused and the resource it named, from its AccessDenied message
/// ("User: … is not authorized to perform: sqs:SendMessage on resource: arn:… because …"),
/// the action written as the table writes it.
pub fn refused_action(message: &str) -> Option<(String, Option<String>)> {
    let (_, rest) = message.split_once("not authorized to perform: ")?;
    let mut words = rest.split(|c: char| c.is_whitespace() || c == ',');
    let action = words.next().filter(|a| a.contains(':'))?;
    let known = GRANTS
        .iter()
        .flat_map(|g| g.actions.iter())
        .find(|a| a.eq_ignore_ascii_case(action));
    let resource = rest
        .split_once(" on resource: ")
        .and_then(|(_, r)| r.split_whitespace().next())
        .map(str::to_owned);
    Some((
        known.map_or_else(|| action.to_string(), |a| (*a).to_string()),
        resource,
    ))
}

/// What to tell the person AWS refused: the permission, and the policy of the stage
/// (`schedkit-<stage>-…` when the command named none) that grants it on that stage's
/// resources (a refusal on another resource may be a wrong name). A refusal that no grant
/// lifts (an explicit deny, a permissions boundary, a service control or session policy)
/// says so instead. None when the message is not a refusal that names an action.
pub fn refusal_hint(message: &str, stage: Option<&str>) -> Option<String> {
    let (action, resource) = refused_action(message)?;
    let on = resource.map(|r| format!(" on {r}")).unwrap_or_default();
    let because = message
        .split_once(" because ")
        .map_or("", |(_, b)| b.trim_end_matches('.'));
    if !because.is_empty() && !because.starts_with("no identity-based policy allows") {
        return Some(format!(
            "AWS refused {action}{on} because {because}: granting it to you does not lift that; ask whoever manages the account"
        ));
    }
    let stage = stage.unwrap_or("<stage>");
    Some(match granted_by(&action) {
        Some(role) => format!(
            "AWS refused {action}{on}: the managed policy `{}` grants it on stage `{stage}`'s resources; attach it to your role or user (the book: Operating a stage, Roles)",
            role.policy_name(stage)
        ),
        None => format!(
            "AWS refused {action}{on}, which neither of the stage's policies grants: the command needs more than the console's permissions (the book: Operating a stage, Roles)"
        ),
    })
}

/// One statement of a policy: actions allowed on resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The grant's id.
    pub sid: &'static str,
    /// IAM actions.
    pub actions: &'static [&'static str],
    /// The resources, as `arns` wrote them.
    pub resources: Vec<String>,
    /// `iam:PassRole`, allowed only towards EventBridge Scheduler.
    pub passes_role: bool,
}

/// The statements of `role`'s policy, each grant's resources written by `arns` (the
/// template's expressions, or the ARNs of a stage at hand). A grant on resources the stage
/// does not have (chains, when the catalog has none) is left out.
pub fn statements(role: Role, arns: impl Fn(On) -> Vec<String>) -> Vec<Statement> {
    GRANTS
        .iter()
        .filter(|g| g.role <= role)
        .map(|g| Statement {
            sid: g.sid,
            actions: g.actions,
            resources: g.on.iter().flat_map(|on| arns(*on)).collect(),
            passes_role: g.actions == ["iam:PassRole"],
        })
        .filter(|s| !s.resources.is_empty())
        .collect()
}

/// `role`'s policy document (JSON) over the given ARNs.
pub fn document(role: Role, arns: impl Fn(On) -> Vec<String>) -> serde_json::Value {
    let statements: Vec<serde_json::Value> = statements(role, arns)
        .into_iter()
        .map(|s| {
            let mut st = serde_json::json!({
                "Sid": s.sid,
                "Effect": "Allow",
                "Action": s.actions,
                "Resource": s.resources,
            });
            if s.passes_role {
                st["Condition"] = serde_json::json!({
                    "StringEquals": { "iam:PassedToService": "scheduler.amazonaws.com" }
                });
            }
            st
        })
        .collect();
    serde_json::json!({ "Version": "2012-10-17", "Statement": statements })
}

/// Writes both managed policies into the template's generated resources.
pub(super) fn write(r: &mut String, catalog: &Catalog) {
    for role in [Role::Viewer, Role::Operator] {
        policy(r, catalog, role);
    }
}

fn policy(r: &mut String, catalog: &Catalog, role: Role) {
    let (name, description) = match role {
        Role::Viewer => (
            "viewer",
            "schedkit viewer: every read the console and the web page make on this stage; nothing that changes state.",
        ),
        Role::Operator => (
            "operator",
            "schedkit operator: the viewer's reads and exactly the console's actions on this stage (cancel, pause, fire, redrive, purge, rerun, skip, sync); the audit trail.",
        ),
    };
    writeln!(r, "  {}:", role.logical_id()).unwrap();
    writeln!(r, "    Type: AWS::IAM::ManagedPolicy").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(
        r,
        "      ManagedPolicyName: !Sub schedkit-${{Stage}}-{name}"
    )
    .unwrap();
    writeln!(r, "      Description: {}", super::resources::q(description)).unwrap();
    writeln!(r, "      PolicyDocument:").unwrap();
    writeln!(r, "        Version: \"2012-10-17\"").unwrap();
    writeln!(r, "        Statement:").unwrap();
    for s in statements(role, |on| arns(catalog, on)) {
        writeln!(r, "          - Sid: {}", s.sid).unwrap();
        writeln!(r, "            Effect: Allow").unwrap();
        writeln!(r, "            Action: [{}]", s.actions.join(", ")).unwrap();
        writeln!(r, "            Resource:").unwrap();
        for arn in s.resources {
            writeln!(r, "              - {arn}").unwrap();
        }
        if s.passes_role {
            writeln!(r, "            Condition:").unwrap();
            writeln!(
                r,
                "              StringEquals: {{ iam:PassedToService: scheduler.amazonaws.com }}"
            )
            .unwrap();
        }
    }
    writeln!(r).unwrap();
}

/// The template's ARNs of one kind of resource.
fn arns(catalog: &Catalog, on: On) -> Vec<String> {
    const SCHEDULER: &str = "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}";
    match on {
        On::Table => vec!["!GetAtt ExecutionsTable.Arn".into()],
        On::TableIndexes => vec!["!Sub \"${ExecutionsTable.Arn}/index/*\"".into()],
        On::JobsQueue => vec![
            "!GetAtt JobsQueue.Arn".into(),
            "!GetAtt HostJobsQueue.Arn".into(),
            "!GetAtt UrgentJobsQueue.Arn".into(),
            "!GetAtt UrgentHostJobsQueue.Arn".into(),
        ],
        On::DeadLetterQueue => vec!["!GetAtt JobsDeadLetterQueue.Arn".into()],
        On::ScheduleGroups => vec![
            "!GetAtt ScheduleGroup.Arn".into(),
            format!("!Sub \"{SCHEDULER}:schedule-group/${{ScheduleGroup}}-once\""),
        ],
        On::Schedules => vec![
            format!("!Sub \"{SCHEDULER}:schedule/${{ScheduleGroup}}/*\""),
            format!("!Sub \"{SCHEDULER}:schedule/${{ScheduleGroup}}-once/*\""),
        ],
        // The stage's chains by the name they share, so a hundred chains make a policy of
        // the same size (a managed policy holds 6,144 characters); none without chains.
        On::ChainMachines if catalog.chains.is_empty() => Vec::new(),
        On::ChainExecutions if catalog.chains.is_empty() => Vec::new(),
        On::ChainMachines => vec![super::chain_resources::STATE_MACHINES.into()],
        On::ChainExecutions => vec![super::chain_resources::EXECUTIONS.into()],
        On::SchedulerRole => vec!["!GetAtt SchedulerRole.Arn".into()],
        On::StageAlarms => super::stage_alarms::resources(catalog)
            .into_iter()
            .map(|id| format!("!GetAtt {id}.Arn"))
            .collect(),
        On::Anything => vec!["\"*\"".into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refused_action_is_read_from_awss_message_and_named_with_its_policy() {
        let denied = "dynamodb: AccessDeniedException: User: arn:aws:iam::000000000000:user/ann is not authorized to perform: dynamodb:UpdateItem on resource: arn:aws:dynamodb:us-east-1:000000000000:table/schedkit-dev-executions because no identity-based policy allows the dynamodb:UpdateItem action";
        let (action, resource) = refused_action(denied).unwrap();
        assert_eq!(action, "dynamodb:UpdateItem");
        assert_eq!(
            resource.as_deref(),
            Some("arn:aws:dynamodb:us-east-1:000000000000:table/schedkit-dev-executions")
        );
        let hint = refusal_hint(denied, Some("dev")).unwrap();
        assert!(hint.contains("dynamodb:UpdateItem"), "{hint}");
        assert!(hint.contains("`schedkit-dev-operator`"), "{hint}");
        // SQS writes the action in lower case.
        let sqs = "AccessDenied: User: arn:aws:iam::1:user/ann is not authorized to perform: sqs:receivemessage on resource: arn:aws:sqs:us-east-1:1:schedkit-dev-dlq";
        assert_eq!(refused_action(sqs).unwrap().0, "sqs:ReceiveMessage");
        assert!(
            refusal_hint(sqs, Some("dev"))
                .unwrap()
                .contains("`schedkit-dev-operator`")
        );
        let query = "User: u is not authorized to perform: dynamodb:Query on resource: t";
        assert!(
            refusal_hint(query, Some("dev"))
                .unwrap()
                .contains("`schedkit-dev-viewer`")
        );
        // An action neither policy grants says so.
        let other = "User: x is not authorized to perform: lambda:InvokeFunction on resource: f";
        assert!(
            refusal_hint(other, Some("dev"))
                .unwrap()
                .contains("neither")
        );
        assert_eq!(
            refusal_hint("ResourceNotFoundException: no table", Some("dev")),
            None
        );
        // Without a stage, the policy's name says where the stage goes.
        assert!(
            refusal_hint(denied, None)
                .unwrap()
                .contains("`schedkit-<stage>-operator`")
        );
        // What no grant lifts is not answered with "attach".
        for because in [
            "with an explicit deny in a service control policy",
            "no permissions boundary allows the sqs:SendMessage action",
            "with an explicit deny in an identity-based policy",
        ] {
            let denied = format!(
                "User: u is not authorized to perform: sqs:SendMessage on resource: q because {because}"
            );
            let hint = refusal_hint(&denied, Some("dev")).unwrap();
            assert!(!hint.contains("attach") && hint.contains(because), "{hint}");
        }
    }

    #[test]
    fn the_operator_holds_every_grant_and_the_viewer_no_write() {
        assert_eq!(granted_by("sqs:ReceiveMessage"), Some(Role::Operator));
        assert_eq!(granted_by("sqs:GetQueueAttributes"), Some(Role::Viewer));
        assert_eq!(granted_by("SQS:SendMessage"), Some(Role::Operator));
        assert_eq!(granted_by("sqs:PurgeQueue"), None);
        let writes = [
            "Put", "Update", "Delete", "Send", "Change", "Start", "Stop", "Create", "Pass",
            "Redrive",
        ];
        for grant in GRANTS.iter().filter(|g| g.role == Role::Viewer) {
            for action in grant.actions {
                let verb = action.split(':').nth(1).unwrap();
                assert!(
                    !writes.iter().any(|w| verb.starts_with(w)),
                    "the viewer's {action} changes state"
                );
            }
        }
    }
}
