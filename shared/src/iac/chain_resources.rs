//! The template's resources for the catalog's chains: each chain's state machine (its
//! definition from `chains/<chain>.asl.json`, see [`super::chain_definition`]) and its
//! alarm on Step Functions' own failed executions (AWS's metrics of a state machine carry
//! its ARN, not the stage: one alarm per chain); and, once for all chains, the worker's
//! permission to start them and answer their steps. A chain's paused runs are the stage's
//! `chains-paused` alarm's ([`super::stage_alarms`]).

use std::fmt::Write;

use super::chain_definition::definition_file;
use super::resources::{NOTIFY, logical_id, q};
use crate::catalog::{Catalog, Chain};

/// Writes every chain's resources; nothing when the catalog has none.
pub(super) fn write(r: &mut String, catalog: &Catalog) {
    if catalog.chains.is_empty() {
        return;
    }
    for chain in catalog.chains.values() {
        state_machine(r, chain);
        alarms(r, chain);
    }
    worker_policy(r);
}

fn state_machine(r: &mut String, chain: &Chain) {
    let id = logical_id(&chain.name);
    writeln!(r, "  Chain{id}:").unwrap();
    writeln!(r, "    Type: AWS::Serverless::StateMachine").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(
        r,
        "      Name: !Sub {}",
        crate::orchestrator::state_machine_name("${Stage}", &chain.name)
    )
    .unwrap();
    writeln!(r, "      DefinitionUri: {}", definition_file(&chain.name)).unwrap();
    writeln!(r, "      DefinitionSubstitutions:").unwrap();
    writeln!(r, "        JobsQueueUrl: !Ref JobsQueue").unwrap();
    writeln!(r, "        HostJobsQueueUrl: !Ref HostJobsQueue").unwrap();
    writeln!(r, "        Partition: !Ref AWS::Partition").unwrap();
    writeln!(r, "      Role: !GetAtt ChainRole.Arn").unwrap();
    writeln!(r, "      Logging:").unwrap();
    writeln!(r, "        Level: ERROR").unwrap();
    writeln!(r, "        IncludeExecutionData: false").unwrap();
    writeln!(r, "        Destinations:").unwrap();
    writeln!(r, "          - CloudWatchLogsLogGroup:").unwrap();
    writeln!(r, "              LogGroupArn: !GetAtt ChainLogGroup.Arn").unwrap();
    writeln!(r, "      Tracing:\n        Enabled: true\n").unwrap();
}

/// Step Functions' own failed, timed-out or aborted executions: what schedkit did not
/// expect (a paused chain ends its execution SUCCEEDED).
fn alarms(r: &mut String, chain: &Chain) {
    let id = logical_id(&chain.name);
    let owner = &chain.spec.owner;
    writeln!(r, "  ChainExecutionsAlarm{id}:").unwrap();
    writeln!(r, "    Type: AWS::CloudWatch::Alarm").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(
        r,
        "      AlarmName: !Sub {}",
        super::stage_alarms::chain_alarm_name("${Stage}", &chain.name)
    )
    .unwrap();
    writeln!(r, "      AlarmDescription: {}", q(&format!("A Step Functions execution of chain {} failed, timed out or was aborted: not a paused chain (that ends SUCCEEDED) but something schedkit did not expect, e.g. its end message could not be sent. See the execution's history. Owner: {owner}.", chain.name))).unwrap();
    writeln!(r, "      Metrics:").unwrap();
    for (i, metric) in [
        "ExecutionsFailed",
        "ExecutionsTimedOut",
        "ExecutionsAborted",
    ]
    .iter()
    .enumerate()
    {
        writeln!(r, "        - Id: m{i}\n          ReturnData: false\n          MetricStat:\n            Period: 300\n            Stat: Sum").unwrap();
        writeln!(r, "            Metric:\n              Namespace: AWS/States\n              MetricName: {metric}").unwrap();
        writeln!(
            r,
            "              Dimensions: [{{ Name: StateMachineArn, Value: !Ref Chain{id} }}]"
        )
        .unwrap();
    }
    writeln!(r, "        - Id: ended_badly\n          Label: executions failed, timed out or aborted\n          ReturnData: true\n          Expression: \"FILL(m0, 0) + FILL(m1, 0) + FILL(m2, 0)\"").unwrap();
    writeln!(r, "      EvaluationPeriods: 1\n      Threshold: 1\n      ComparisonOperator: GreaterThanOrEqualToThreshold").unwrap();
    writeln!(
        r,
        "      TreatMissingData: notBreaching\n      AlarmActions: {NOTIFY}\n"
    )
    .unwrap();
}

/// The worker starts the stage's chains (a trigger on the jobs queue) and answers their
/// steps' tasks: every state machine of the stage, by the name they share
/// (`schedkit-<stage>.<chain>`; no stage name has a `.`), so the policy is the same size for
/// a hundred chains as for one (a role's inline policies hold 10,240 characters). The task
/// actions take no resource: Step Functions authorises them by the token.
fn worker_policy(r: &mut String) {
    writeln!(r, "  WorkerChainPolicy:").unwrap();
    writeln!(r, "    Type: AWS::IAM::Policy").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(r, "      PolicyName: chains").unwrap();
    writeln!(r, "      Roles: [!Ref WorkerRole]").unwrap();
    writeln!(r, "      PolicyDocument:").unwrap();
    writeln!(r, "        Version: \"2012-10-17\"").unwrap();
    writeln!(r, "        Statement:").unwrap();
    writeln!(r, "          - Sid: StartChains").unwrap();
    writeln!(r, "            Effect: Allow").unwrap();
    writeln!(r, "            Action: states:StartExecution").unwrap();
    writeln!(r, "            Resource: {}", STATE_MACHINES).unwrap();
    // An execution the worker started after its run was cancelled (the cancel looked
    // before the start) is stopped by the worker, unless described as ended
    // (`orchestrator::stop_unless_ended`).
    writeln!(r, "          - Sid: StopCancelledChains").unwrap();
    writeln!(r, "            Effect: Allow").unwrap();
    writeln!(
        r,
        "            Action: [states:DescribeExecution, states:StopExecution]"
    )
    .unwrap();
    writeln!(r, "            Resource: {}", EXECUTIONS).unwrap();
    writeln!(r, "          - Sid: AnswerSteps").unwrap();
    writeln!(r, "            Effect: Allow").unwrap();
    writeln!(
        r,
        "            Action: [states:SendTaskSuccess, states:SendTaskFailure, states:SendTaskHeartbeat]"
    )
    .unwrap();
    writeln!(r, "            Resource: \"*\"\n").unwrap();
}

/// Every state machine of the stage, by the name they share.
pub(super) const STATE_MACHINES: &str = "!Sub \"arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:schedkit-${Stage}.*\"";

/// Every execution of the stage's state machines.
pub(super) const EXECUTIONS: &str = "!Sub \"arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:schedkit-${Stage}.*\"";
