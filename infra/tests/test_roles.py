"""The viewer and operator policies, read off the template: the viewer allows no action
that changes state (nor a receive, which hides what it reads), and the operator holds every
statement of the viewer's.

Which actions change state is AWS's word: the access level each action has in the Service
Authorization Reference (Read and List read; Write, Permissions management and Tagging
change). An action not in the table below fails the test until someone looks it up."""

import pathlib
import unittest

from cfnlint.decode import decode_str

TEMPLATE = pathlib.Path(__file__).resolve().parents[1] / "template.yaml"

# The access level of every action either policy grants (docs.aws.amazon.com/service-
# authorization/latest/reference: "Actions defined by ...", column "Access level").
ACCESS_LEVEL = {
    "dynamodb:GetItem": "Read",
    "dynamodb:BatchGetItem": "Read",
    "dynamodb:Query": "Read",
    "dynamodb:PutItem": "Write",
    "dynamodb:UpdateItem": "Write",
    "dynamodb:DeleteItem": "Write",
    "sqs:GetQueueUrl": "Read",
    "sqs:GetQueueAttributes": "Read",
    # Read by AWS's word, though a receive hides the message (see HIDES).
    "sqs:ReceiveMessage": "Read",
    "sqs:ListMessageMoveTasks": "Read",
    "sqs:SendMessage": "Write",
    "sqs:DeleteMessage": "Write",
    "sqs:ChangeMessageVisibility": "Write",
    "sqs:StartMessageMoveTask": "Write",
    "scheduler:GetSchedule": "Read",
    "scheduler:GetScheduleGroup": "Read",
    "scheduler:ListTagsForResource": "Read",
    "scheduler:ListSchedules": "List",
    "scheduler:CreateSchedule": "Write",
    "scheduler:UpdateSchedule": "Write",
    "scheduler:DeleteSchedule": "Write",
    "scheduler:CreateScheduleGroup": "Write",
    "cloudwatch:GetMetricStatistics": "Read",
    "cloudwatch:DescribeAlarms": "Read",
    "cloudwatch:DescribeAlarmContributors": "Read",
    "states:DescribeExecution": "Read",
    "states:StartExecution": "Write",
    "states:StopExecution": "Write",
    "states:RedriveExecution": "Write",
    "iam:PassRole": "Write",
}
READS = {"Read", "List"}
# Reads that change what others see: a receive hides the message for as long as the
# receiver asks (up to 12 hours), out of every redrive's and alarm's sight. Not the viewer's.
HIDES = {"sqs:ReceiveMessage"}


def as_list(value):
    return value if isinstance(value, list) else [value]


def statements(template, logical_id):
    props = template["Resources"][logical_id]["Properties"]
    return as_list(props["PolicyDocument"]["Statement"])


def problems(template):
    """What is wrong with the two policies, one line each."""
    found = []
    resources = template.get("Resources", {})
    for lid, name in (("ViewerPolicy", "viewer"), ("OperatorPolicy", "operator")):
        if resources.get(lid, {}).get("Type") != "AWS::IAM::ManagedPolicy":
            found.append(f"{lid}: no managed policy")
            continue
        wanted = {"Fn::Sub": f"schedkit-${{Stage}}-{name}"}
        if resources[lid]["Properties"].get("ManagedPolicyName") != wanted:
            found.append(f"{lid}: not named schedkit-<stage>-{name}")
        for st in statements(template, lid):
            if st.get("Effect") != "Allow" or "NotAction" in st or "NotResource" in st:
                found.append(f"{lid}/{st.get('Sid')}: only Allow statements of actions on resources")
            for action in as_list(st.get("Action", [])):
                level = ACCESS_LEVEL.get(action)
                if level is None:
                    found.append(f"{lid}/{st.get('Sid')}: {action} has no access level in the table")
                elif lid == "ViewerPolicy" and level not in READS:
                    found.append(f"ViewerPolicy/{st.get('Sid')}: {action} changes state ({level})")
                elif lid == "ViewerPolicy" and action in HIDES:
                    found.append(f"ViewerPolicy/{st.get('Sid')}: {action} hides what it reads")
    if not found:
        operator = statements(template, "OperatorPolicy")
        for st in statements(template, "ViewerPolicy"):
            if st not in operator:
                found.append(f"OperatorPolicy: lacks the viewer's statement {st.get('Sid')}")
    return found


class Roles(unittest.TestCase):
    def test_the_viewer_changes_nothing_and_the_operator_holds_the_viewers_reads(self):
        template, matches = decode_str(TEMPLATE.read_text())
        self.assertFalse(matches, matches)
        self.assertEqual(problems(template), [])
        levels = {
            ACCESS_LEVEL[a]
            for st in statements(template, "OperatorPolicy")
            for a in as_list(st["Action"])
        }
        self.assertEqual(levels, {"Read", "List", "Write"})

    def test_the_check_catches_what_it_should(self):
        bad = """
Resources:
  Table: {Type: AWS::DynamoDB::Table}
  ViewerPolicy:
    Type: AWS::IAM::ManagedPolicy
    Properties:
      ManagedPolicyName: !Sub schedkit-${Stage}-viewer
      PolicyDocument:
        Statement:
          - {Sid: A, Effect: Allow, Action: [dynamodb:GetItem, dynamodb:PutItem], Resource: !GetAtt Table.Arn}
          - {Sid: B, Effect: Allow, Action: dynamodb:Scan, Resource: !GetAtt Table.Arn}
          - {Sid: R, Effect: Allow, Action: sqs:ReceiveMessage, Resource: !GetAtt Table.Arn}
  OperatorPolicy:
    Type: AWS::IAM::ManagedPolicy
    Properties:
      ManagedPolicyName: operator
      PolicyDocument:
        Statement:
          - {Sid: C, Effect: Deny, Action: dynamodb:GetItem, Resource: !GetAtt Table.Arn}
"""
        template, _ = decode_str(bad)
        self.assertEqual(
            problems(template),
            [
                "ViewerPolicy/A: dynamodb:PutItem changes state (Write)",
                "ViewerPolicy/B: dynamodb:Scan has no access level in the table",
                "ViewerPolicy/R: sqs:ReceiveMessage hides what it reads",
                "OperatorPolicy: not named schedkit-<stage>-operator",
                "OperatorPolicy/C: only Allow statements of actions on resources",
            ],
        )
        ok = bad.replace(", dynamodb:PutItem", "").replace(
            "- {Sid: R, Effect: Allow, Action: sqs:ReceiveMessage, Resource: !GetAtt Table.Arn}", ""
        ).replace(
            "- {Sid: B, Effect: Allow, Action: dynamodb:Scan, Resource: !GetAtt Table.Arn}", ""
        ).replace("ManagedPolicyName: operator", "ManagedPolicyName: !Sub schedkit-${Stage}-operator").replace(
            "Sid: C, Effect: Deny", "Sid: C, Effect: Allow"
        )
        self.assertEqual(
            problems(decode_str(ok)[0]), ["OperatorPolicy: lacks the viewer's statement A"]
        )


if __name__ == "__main__":
    unittest.main()
