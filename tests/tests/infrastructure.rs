//! The SAM template on LocalStack: create, no-op redeploy, update; the outputs name working
//! resources (the deployed worker Lambda processes an envelope through the SQS event
//! source); the accountant's schedule invokes the worker, which checks the stage; the stack
//! owns the schedule group and sync its schedules.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use schedkit::catalog::Catalog;
use schedkit::trigger::sync;
use schedkit::{Envelope, Status};
use schedkit_testkit::stack::deploy;
use schedkit_testkit::{localstack, unique};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_template_deploys_updates_and_runs_on_localstack() {
    let sdk = localstack().await;
    let stage = unique("iac");
    let enabled = ("WorkerEventSource", "enabled");

    let created = deploy(&stage, &[enabled]).await.unwrap();
    assert_eq!(
        (created.status.as_str(), created.changed),
        ("CREATE_COMPLETE", true)
    );
    let again = deploy(&stage, &[enabled]).await.unwrap();
    assert!(!again.changed, "an unchanged deploy is a no-op");
    assert_eq!(again.outputs, created.outputs);
    let updated = deploy(&stage, &[enabled, ("OldestMessageAlarmSeconds", "600")])
        .await
        .unwrap();
    assert_eq!(
        (updated.status.as_str(), updated.changed),
        ("UPDATE_COMPLETE", true)
    );
    // The urgent queue has a backlog alarm of its own: an urgent run waits seconds, not
    // the jobs queue's fifteen minutes.
    let alarms = aws_sdk_cloudwatch::Client::new(&sdk)
        .describe_alarms()
        .alarm_names(format!("schedkit-{stage}-urgent-backlog"))
        .send()
        .await
        .unwrap();
    let urgent = alarms
        .metric_alarms()
        .first()
        .expect("the urgent backlog alarm");
    let queue = format!("schedkit-{stage}-jobs-urgent");
    assert_eq!(
        (
            urgent.metric_name(),
            urgent.threshold(),
            urgent.dimensions().first().and_then(|d| d.value())
        ),
        (
            Some("ApproximateAgeOfOldestMessage"),
            Some(120.0),
            Some(queue.as_str())
        ),
        "{urgent:?}"
    );

    // The outputs name working resources: an envelope on the queue is run by the deployed
    // worker through LocalStack's event source mapping, to a DONE record.
    let o = &updated.outputs;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let mut invoice = Envelope::new("record-invoice", "2026-11-01T00:00:00Z".parse().unwrap());
    invoice.payload = json!({"tenant": "deployed", "billing_month": "2026-10", "amount_cents": 9})
        .as_object()
        .cloned();
    sqs.send_message()
        .queue_url(&o["JobsQueueUrl"])
        .message_body(invoice.to_json())
        .send()
        .await
        .unwrap();
    let store = schedkit::DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        &o["ExecutionsTableName"],
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let record = loop {
        if let Some(r) = store.get("invoice:2026-10:deployed").await.unwrap()
            && r.status == Status::Done
        {
            break r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the deployed worker did not run the job"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(record.attempt, 1);
    assert!(
        record.owner.unwrap().contains(&o["WorkerFunctionName"]),
        "run by the Lambda"
    );

    // The stage's accountant: its schedule (outside the stage's group) invokes the worker
    // function with its command; invoked so, the function checks the stage and answers.
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let accountant = scheduler
        .get_schedule()
        .name(format!("schedkit-{stage}-accountant"))
        .send()
        .await
        .expect("the stack made the accountant's schedule");
    assert_eq!(accountant.schedule_expression(), Some("rate(5 minutes)"));
    let target = accountant.target().unwrap();
    let lambda = aws_sdk_lambda::Client::new(&sdk);
    let function = lambda
        .get_function()
        .function_name(&o["WorkerFunctionName"])
        .send()
        .await
        .unwrap();
    assert_eq!(
        Some(target.arn()),
        function.configuration().and_then(|c| c.function_arn())
    );
    let answer = lambda
        .invoke()
        .function_name(target.arn())
        .payload(aws_sdk_lambda::primitives::Blob::new(
            target.input().unwrap().as_bytes(),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.function_error(), None);
    let check: serde_json::Value =
        serde_json::from_slice(answer.payload().unwrap().as_ref()).unwrap();
    assert_eq!(check["written"], true, "{check}");
    assert_eq!(
        (&check["missed"], &check["late"]),
        (&json!(0), &json!(0)),
        "{check}"
    );
    assert!(
        store.ledger().await.unwrap().is_some_and(|l| l.checks == 1),
        "the check kept its ledger"
    );

    // One owner of the schedules: the stack makes the group (tagged with where its
    // schedules send) and no schedule; a sync with nothing but the group's tags creates the
    // catalog's, a deploy after it neither fails (AlreadyExists) nor changes them, and a
    // second sync finds nothing to do.
    let group = o["ScheduleGroupName"].clone();
    let names = || async {
        let mut deployed = BTreeMap::new();
        for s in scheduler
            .list_schedules()
            .group_name(&group)
            .send()
            .await
            .unwrap()
            .schedules
        {
            let name = s.name.unwrap();
            let got = scheduler
                .get_schedule()
                .group_name(&group)
                .name(&name)
                .send()
                .await
                .unwrap();
            let dlq = got
                .target
                .and_then(|t| t.dead_letter_config)
                .and_then(|d| d.arn);
            deployed.insert(name, (got.schedule_expression.unwrap(), dlq));
        }
        deployed
    };
    assert!(names().await.is_empty(), "the stack made schedules");
    let targets = sync::stage_targets(&scheduler, &group)
        .await
        .unwrap()
        .expect("the stack tagged its group with its targets");
    assert_eq!(targets.queue_arn, o["JobsQueueArn"]);
    assert_eq!(targets.role_arn, o["SchedulerRoleArn"]);
    assert_eq!(
        targets.dead_letter_arn.as_deref(),
        Some(o["ScheduleDeadLetterQueueArn"].as_str())
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/catalog.toml");
    let mut catalog = Catalog::load(&path).unwrap();
    catalog.settings.schedule_group = group.clone();
    let plan = sync::plan(&scheduler, &catalog, &targets).await.unwrap();
    sync::apply(&scheduler, &plan).await.unwrap();
    // Every scheduled job and chain (a chain's firing is its trigger on the jobs queue).
    let dlq = Some(o["ScheduleDeadLetterQueueArn"].clone());
    let mut wanted: BTreeMap<_, _> = catalog
        .scheduled()
        .map(|j| {
            let expression = j.spec.schedule.as_ref().unwrap().expression.clone();
            (j.name.clone(), (expression, dlq.clone()))
        })
        .collect();
    for c in catalog.chains.values() {
        let expression = c.spec.schedule.as_ref().unwrap().expression.clone();
        wanted.insert(c.name.clone(), (expression, dlq.clone()));
    }
    assert_eq!(names().await, wanted);
    // Each chain of the catalog is a state machine of the stage, from its generated
    // definition (the template's substitutions filled in).
    let sfn = aws_sdk_sfn::Client::new(&sdk);
    for chain in catalog.chains.values() {
        let arn = o["JobsQueueArn"].replace(":sqs:", ":states:").replace(
            &format!(":schedkit-{stage}-jobs"),
            &format!(
                ":stateMachine:{}",
                schedkit::orchestrator::state_machine_name(&stage, &chain.name)
            ),
        );
        let machine = sfn
            .describe_state_machine()
            .state_machine_arn(&arn)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{arn}: {e:?}"));
        let deployed: serde_json::Value = serde_json::from_str(&machine.definition).unwrap();
        let generated: serde_json::Value = serde_json::from_str(
            &schedkit::iac::render_definition(&catalog, chain)
                .replace("${Partition}", "aws")
                .replace("${JobsQueueUrl}", &o["JobsQueueUrl"]),
        )
        .unwrap();
        assert_eq!(deployed, generated, "{}", chain.name);
    }
    // Into a VPC (LocalStack's default one), with the endpoints a worker without a NAT needs.
    let net = default_network();
    let in_vpc = [
        enabled,
        ("OldestMessageAlarmSeconds", "900"),
        ("WorkerSubnetIds", net["subnet"].as_str()),
        ("WorkerSecurityGroupIds", net["security_group"].as_str()),
        ("VpcId", net["vpc"].as_str()),
        ("WorkerRouteTableIds", net["route_table"].as_str()),
        ("CreateVpcEndpoints", "true"),
    ];
    let redeployed = deploy(&stage, &in_vpc).await.unwrap();
    assert_eq!(redeployed.status, "UPDATE_COMPLETE");
    let function = aws_sdk_lambda::Client::new(&sdk)
        .get_function_configuration()
        .function_name(format!("schedkit-{stage}-worker"))
        .send()
        .await
        .unwrap();
    let vpc = function.vpc_config.expect("the worker is in the VPC");
    assert_eq!(vpc.subnet_ids(), [net["subnet"].clone()]);
    assert_eq!(vpc.security_group_ids(), [net["security_group"].clone()]);
    assert_eq!(
        names().await,
        wanted,
        "a deploy after a sync changed the schedules"
    );
    let plan = sync::plan(&scheduler, &catalog, &targets).await.unwrap();
    assert!(plan.is_empty(), "a second sync would write:\n{plan}");
    // And out of the VPC again: an update to the parameters' defaults (LocalStack keeps the
    // function's VpcConfig when the property goes; AWS detaches it), then the stack deletes.
    let out = deploy(&stage, &[enabled, ("OldestMessageAlarmSeconds", "900")])
        .await
        .unwrap();
    assert_eq!(out.status, "UPDATE_COMPLETE");

    schedkit_testkit::stack::undeploy(&stage).await.unwrap();
}

/// LocalStack's default VPC: a subnet of it, its default security group and main route
/// table (read with the deploy tools' boto3: the tests link no EC2 client for this alone).
fn default_network() -> std::collections::BTreeMap<String, String> {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../infra/.cache/deploy-venv/bin/python");
    let script = r#"
import json, os, boto3
ec2 = boto3.client("ec2", endpoint_url=os.environ.get("AWS_ENDPOINT_URL", "http://127.0.0.1:4566"),
                   region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
only = [{"Name": "vpc-id", "Values": [vpc]}]
print(json.dumps({
    "vpc": vpc,
    "subnet": ec2.describe_subnets(Filters=only)["Subnets"][0]["SubnetId"],
    "security_group": ec2.describe_security_groups(Filters=only)["SecurityGroups"][0]["GroupId"],
    "route_table": ec2.describe_route_tables(Filters=only)["RouteTables"][0]["RouteTableId"],
}))
"#;
    let out = std::process::Command::new(&python)
        .args(["-c", script])
        .output()
        .unwrap_or_else(|e| panic!("{} runs: {e}", python.display()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
