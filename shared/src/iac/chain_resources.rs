//! The template's resources for the catalog's chains: each chain's state machine (its
//! definition from `chains/<chain>.asl.json`, see [`super::chain_definition`]), its
//! alarms, and the worker's permission to start it and answer its steps.

use std::fmt::Write;

use super::chain_definition::definition_file;
use super::resources::{JobAlarm, NOTIFY, logical_id, q};
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
    worker_policy(r, catalog);
}

fn state_machine(r: &mut String, chain: &Chain) {
    let id = logical_id(&chain.name);
    writeln!(r, "  Chain{id}:").unwrap();
    writeln!(r, "    Type: AWS::Serverless::StateMachine").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(r, "      Name: !Sub schedkit-${{Stage}}-{}", chain.name).unwrap();
    writeln!(r, "      DefinitionUri: {}", definition_file(&chain.name)).unwrap();
    writeln!(r, "      DefinitionSubstitutions:").unwrap();
    writeln!(r, "        JobsQueueUrl: !Ref JobsQueue").unwrap();
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

/// PAUSED (schedkit's metric: a step failed for good) and Step Functions' own failed,
/// timed-out or aborted executions (what schedkit did not expect: a paused chain ends its
/// execution SUCCEEDED).
fn alarms(r: &mut String, chain: &Chain) {
    let id = logical_id(&chain.name);
    let owner = &chain.spec.owner;
    let paused = format!(
        "Chain {} paused: a step failed for good; the other branches of its stage finished, later stages did not start. `schedkit executions show <chain key>` names the failed step and its error (each step's record is `<chain key>#<step>`). Owner: {owner}.",
        chain.name
    );
    JobAlarm {
        resource: format!("ChainPausedAlarm{id}"),
        suffix: "paused",
        description: &paused,
        metric: "ChainPaused",
        notify: true,
    }
    .write(r, &chain.name);
    writeln!(r, "  ChainExecutionsAlarm{id}:").unwrap();
    writeln!(r, "    Type: AWS::CloudWatch::Alarm").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(
        r,
        "      AlarmName: !Sub schedkit-${{Stage}}-{}-executions-failed",
        chain.name
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

/// The worker starts each chain (a trigger on the jobs queue) and answers its steps' tasks.
/// The task actions take no resource: Step Functions authorises them by the token.
fn worker_policy(r: &mut String, catalog: &Catalog) {
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
    writeln!(r, "            Resource:").unwrap();
    for chain in catalog.chains.values() {
        writeln!(r, "              - !Ref Chain{}", logical_id(&chain.name)).unwrap();
    }
    writeln!(r, "          - Sid: AnswerSteps").unwrap();
    writeln!(r, "            Effect: Allow").unwrap();
    writeln!(
        r,
        "            Action: [states:SendTaskSuccess, states:SendTaskFailure, states:SendTaskHeartbeat]"
    )
    .unwrap();
    writeln!(r, "            Resource: \"*\"\n").unwrap();
}
