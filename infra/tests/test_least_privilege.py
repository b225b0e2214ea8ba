"""Least privilege, read off the template: every IAM statement names stack resources,
except the actions AWS only accepts on "*" (listed below, each with its reason)."""

import pathlib
import unittest

from cfnlint.decode import decode_str

TEMPLATE = pathlib.Path(__file__).resolve().parents[1] / "template.yaml"

# Actions AWS requires on Resource "*": they act on the account, not on a resource.
STAR_ONLY = {
    # Step Functions' log delivery to CloudWatch Logs (vended logs) is configured account-wide.
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
    # A chain step's task is answered by its token: these take no resource.
    "states:SendTaskSuccess",
    "states:SendTaskFailure",
    "states:SendTaskHeartbeat",
    # The console's reads with no resource-level permissions: metric statistics (status)
    # and the list of schedules (sync's plan).
    "cloudwatch:GetMetricStatistics",
    "scheduler:ListSchedules",
    # X-Ray tracing has no resource-level permissions.
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
}


# The stage's state machines and their executions, by the name prefix they share
# (`schedkit-<stage>.<chain>`; no stage name has a `.`, so no other stage's match): one
# ARN for a hundred chains, where a role's inline policies hold 10,240 characters.
STAGE_CHAINS = (":stateMachine:schedkit-${Stage}.*", ":execution:schedkit-${Stage}.*")


def as_list(value):
    return value if isinstance(value, list) else [value]


def identity_statements(template):
    """(resource logical id, statement) for every identity policy in the template."""
    for name, resource in template.get("Resources", {}).items():
        kind = resource.get("Type")
        props = resource.get("Properties", {})
        if kind == "AWS::IAM::Role":
            for policy in props.get("Policies", []):
                for statement in as_list(policy["PolicyDocument"]["Statement"]):
                    yield name, statement
        elif kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            for statement in as_list(props["PolicyDocument"]["Statement"]):
                yield name, statement


def names_stack_resource(resource, logical_ids):
    """Whether a Resource entry is an ARN of a resource of this stack."""
    if isinstance(resource, dict) and len(resource) == 1:
        (fn, arg), = resource.items()
        if fn == "Ref":
            return arg in logical_ids
        if fn == "Fn::GetAtt":
            target = arg[0] if isinstance(arg, list) else arg.split(".")[0]
            return target in logical_ids
        if fn == "Fn::Sub":
            text = arg if isinstance(arg, str) else arg[0]
            return any("${" + lid in text for lid in logical_ids) or text.endswith(STAGE_CHAINS)
    return False


def problems(template):
    logical_ids = set(template.get("Resources", {}))
    found = []
    for name, resource in template.get("Resources", {}).items():
        if resource.get("Type") == "AWS::Serverless::Function" and "Policies" in resource.get("Properties", {}):
            found.append(f"{name}: use an explicit Role; SAM policy templates attach broad managed policies")
    for name, st in identity_statements(template):
        if st.get("Effect") != "Allow":
            continue
        actions = as_list(st.get("Action", []))
        sid = st.get("Sid", "?")
        for action in actions:
            if action == "*" or action.endswith(":*"):
                found.append(f"{name}/{sid}: wildcard action {action}")
        for resource in as_list(st.get("Resource", [])):
            if resource == "*":
                extra = sorted(set(actions) - STAR_ONLY)
                if extra:
                    found.append(f"{name}/{sid}: Resource \"*\" for {', '.join(extra)}")
            elif not names_stack_resource(resource, logical_ids):
                found.append(f"{name}/{sid}: Resource {resource} is not a resource of this stack")
    return found


# What the worker calls, by the stack resource it calls it on: each must be granted to its
# role (LocalStack does not enforce IAM, so only this check finds a call the role lacks).
WORKER_CALLS = {
    # shared/src/store: claims and transitions, giving a claim back or SKIPPED, the
    # streak's read, a job's pause read with its legacy record.
    "ExecutionsTable": {"dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:BatchGetItem"},
    # shared/src/effects.rs: a job's effects, committed with its DONE record.
    "EffectsTable": {"dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"},
    # shared/src/poller.rs, batch/visibility.rs, batch/requeue.rs (a waiting message sent
    # again), the lease keeper's visibility.
    "JobsQueue": {"sqs:ReceiveMessage", "sqs:SendMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"},
    # shared/src/batch/dead_letter.rs
    "JobsDeadLetterQueue": {"sqs:SendMessage"},
}


def granted(template, role):
    """(action, logical id) pairs the identity statements attached to `role` allow."""
    out = set()
    for name, resource in template.get("Resources", {}).items():
        props = resource.get("Properties", {})
        statements = []
        if name == role:
            for policy in props.get("Policies", []):
                statements += as_list(policy["PolicyDocument"]["Statement"])
        elif resource.get("Type") == "AWS::IAM::Policy" and {"Ref": role} in props.get("Roles", []):
            statements += as_list(props["PolicyDocument"]["Statement"])
        for st in statements:
            if st.get("Effect") != "Allow":
                continue
            for target in as_list(st.get("Resource", [])):
                if isinstance(target, dict) and "Fn::GetAtt" in target:
                    arg = target["Fn::GetAtt"]
                    lid = arg[0] if isinstance(arg, list) else arg.split(".")[0]
                elif isinstance(target, dict) and "Ref" in target:
                    lid = target["Ref"]
                else:
                    continue
                for action in as_list(st.get("Action", [])):
                    out.add((action, lid))
    return out


class LeastPrivilege(unittest.TestCase):
    def test_the_worker_may_make_every_call_it_makes(self):
        template, _ = decode_str(TEMPLATE.read_text())
        allowed = granted(template, "WorkerRole")
        missing = sorted(
            f"{action} on {lid}"
            for lid, actions in WORKER_CALLS.items()
            for action in actions
            if (action, lid) not in allowed
        )
        self.assertEqual(missing, [])

    def test_every_statement_names_stack_resources(self):
        template, matches = decode_str(TEMPLATE.read_text())
        self.assertFalse(matches, matches)
        self.assertGreaterEqual(len(list(identity_statements(template))), 8)
        self.assertEqual(problems(template), [])

    def test_the_check_catches_what_it_should(self):
        bad = """
Resources:
  Queue: {Type: AWS::SQS::Queue}
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument: {}
      Policies:
        - PolicyName: p
          PolicyDocument:
            Statement:
              - {Sid: A, Effect: Allow, Action: sqs:SendMessage, Resource: "*"}
              - {Sid: B, Effect: Allow, Action: "s3:*", Resource: !GetAtt Queue.Arn}
              - {Sid: C, Effect: Allow, Action: sqs:SendMessage, Resource: "arn:aws:sqs:us-east-1:1:other"}
              - {Sid: D, Effect: Allow, Action: xray:PutTraceSegments, Resource: "*"}
  Fn:
    Type: AWS::Serverless::Function
    Properties: {Policies: [AWSLambdaExecute]}
"""
        template, _ = decode_str(bad)
        self.assertEqual(
            problems(template),
            [
                "Fn: use an explicit Role; SAM policy templates attach broad managed policies",
                'Role/A: Resource "*" for sqs:SendMessage',
                "Role/B: wildcard action s3:*",
                "Role/C: Resource arn:aws:sqs:us-east-1:1:other is not a resource of this stack",
            ],
        )


if __name__ == "__main__":
    unittest.main()
