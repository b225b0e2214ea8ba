"""Creates an IAM user on LocalStack holding managed policies, and prints its access key.

    infra/localstack-user.sh NAME POLICY [POLICY ...]

Each POLICY is a managed policy's ARN, or a policy document (JSON, starting with `{`) made a
managed policy `NAME-<n>`.

    infra/localstack-user.sh --role NAME POLICY_ARN [POLICY_ARN ...]

creates the role NAME holding the policies instead, assumes it, and prints the session
(with "session_token"): a role's session is checked against the role's policies too.

    infra/localstack-user.sh --decisions NAME

prints what schedkit's LocalStack decided on each of the user's requests: [{"action",
"resource", "allowed"}, ...].

Prints {"user", "arn", "access_key_id", "secret_access_key"} on stdout. The tests sign the
console's requests with it: schedkit's LocalStack refuses what an IAM user's policies do
not allow (localstack/executor-plugin, iam.py), as AWS does. Running it again for the same
user attaches the policies again (a no-op) and makes a new key (a user holds two at most:
the oldest goes).
"""

import json
import os
import sys
import urllib.parse
import urllib.request

import boto3


def endpoint() -> str:
    port = os.environ.get("LOCALSTACK_PORT", "4566")
    return os.environ.get("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")


def decisions(name: str) -> int:
    """Prints every decision schedkit's LocalStack took on the user's requests."""
    with urllib.request.urlopen(f"{endpoint()}/_localstack/schedkit/iam/{urllib.parse.quote(name)}") as r:
        print(r.read().decode())
    return 0


def role(iam, sts, name: str, policies: list[str]) -> int:
    """Creates the role `name` (if new) holding `policies`, assumes it, prints the session."""
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
             "Principal": {"AWS": "arn:aws:iam::000000000000:root"}}]}
    try:
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
    except iam.exceptions.EntityAlreadyExistsException:
        pass
    for arn in policies:
        iam.attach_role_policy(RoleName=name, PolicyArn=arn)
    session = sts.assume_role(RoleArn=f"arn:aws:iam::000000000000:role/{name}", RoleSessionName="tester")
    key = session["Credentials"]
    print(json.dumps({"user": name, "arn": session["AssumedRoleUser"]["Arn"],
                      "access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"],
                      "session_token": key["SessionToken"]}))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--decisions":
        return decisions(argv[1])
    if len(argv) < 2 or (argv[0] == "--role" and len(argv) < 3):
        print("usage: localstack-user.sh [--role] NAME POLICY [POLICY ...] (an ARN, or a JSON document)",
              file=sys.stderr)
        return 2
    name, policies = argv[0], argv[1:]
    iam, sts = (
        boto3.client(
            service,
            endpoint_url=endpoint(),
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        for service in ("iam", "sts")
    )
    if argv[0] == "--role":
        return role(iam, sts, argv[1], argv[2:])
    try:
        user = iam.create_user(UserName=name)["User"]
    except iam.exceptions.EntityAlreadyExistsException:
        user = iam.get_user(UserName=name)["User"]
    for n, policy in enumerate(policies):
        if policy.startswith("{"):
            policy_name = f"{name}-{n}"
            try:
                arn = iam.create_policy(PolicyName=policy_name, PolicyDocument=policy)["Policy"]["Arn"]
            except iam.exceptions.EntityAlreadyExistsException:
                arn = f"arn:aws:iam::000000000000:policy/{policy_name}"
        else:
            arn = policy
        iam.attach_user_policy(UserName=name, PolicyArn=arn)
    keys = iam.list_access_keys(UserName=name)["AccessKeyMetadata"]
    for old in sorted(keys, key=lambda k: k["CreateDate"])[: max(0, len(keys) - 1)]:
        iam.delete_access_key(UserName=name, AccessKeyId=old["AccessKeyId"])
    key = iam.create_access_key(UserName=name)["AccessKey"]
    print(json.dumps({"user": name, "arn": user["Arn"], "access_key_id": key["AccessKeyId"],
                      "secret_access_key": key["SecretAccessKey"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
