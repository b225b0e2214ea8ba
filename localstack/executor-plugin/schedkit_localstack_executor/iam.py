"""IAM users' permissions, checked as AWS checks them.

LocalStack's community edition checks no permission: every signed request is allowed. The
viewer and operator policies of schedkit's template are only worth something if a
request they do not allow is refused, so this hook refuses it, for requests signed with an
access key of an IAM user (``iam create-access-key``) or with a session of a role of the
IAM store (``sts assume-role``); every other request (the ``test`` keys the tests and the
stack use, sessions of roles that do not exist, LocalStack's own calls between services)
is left alone, as before.

The decision is moto's policy statement evaluation (a library LocalStack ships) over the
user's inline, attached and group policies (a role's inline and attached ones) from
LocalStack's IAM store, an explicit Deny
first. What this module adds
is what AWS's authorizer knows and moto does not: the IAM action of each API operation
(batch operations are authorized by their single form; a DynamoDB transaction by each of
its items) and the ARN of the resource it acts on. Of conditions it knows only
``iam:PassedToService`` (EventBridge Scheduler's, when a schedule passes its role). A refusal
carries AWS's own message, naming the user, the action and the resource.

Every decision is kept per user (or role), readable at ``/_localstack/schedkit/iam/<name>``:
the tests read which actions a policy's holder actually used.
"""

import json
import threading
from urllib.parse import urlparse

# The IAM prefix of each LocalStack service name, where they differ or matter.
PREFIX = {"stepfunctions": "states", "cloudwatch": "cloudwatch", "monitoring": "cloudwatch"}

# Batch operations AWS authorizes by the action of their single form.
SINGLE_FORM = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}

# Operations every identity may call: they need no permission on AWS.
FREE = {"sts:GetCallerIdentity"}

# The error code each service answers a refusal with.
DENIED_CODE = {"dynamodb": "AccessDeniedException", "states": "AccessDeniedException",
               "scheduler": "AccessDeniedException", "lambda": "AccessDeniedException"}

_decisions: dict[str, list[dict]] = {}
_lock = threading.Lock()


class _Principal:
    """An IAM user, or a role's session, of LocalStack's IAM store: its ARN and its policy
    documents."""

    def __init__(self, store, name: str, arn: str, entity):
        from urllib.parse import unquote

        self.name = name
        self.arn = arn
        attached = list(entity.attached_policy_arns)
        documents = list(entity.inline_policies.values())
        for group in store.GROUPS.values():
            if name in group.member_user_names:
                attached += group.attached_policy_arns
                documents += group.inline_policies.values()
        for policy_arn in attached:
            policy = store.MANAGED_POLICIES.get(policy_arn)
            if policy is not None:
                documents.append(policy.versions[policy.policy["DefaultVersionId"]]["Document"])
        self.documents = [unquote(d) if isinstance(d, str) and d.startswith("%") else d for d in documents]


def _principal_of(access_key: str, account_id: str, region: str) -> "_Principal | None":
    """The IAM user the key belongs to, or the role whose session it is (a role of the
    IAM store: a session of a role that does not exist is left alone, as before); None
    for any other key."""
    from localstack.services.iam.models import iam_stores
    from localstack.services.sts.models import sts_stores

    store = iam_stores[account_id][region]
    name = store.ACCESS_KEY_INDEX.get(access_key)
    if name in store.USERS:
        return _Principal(store, name, store.USERS[name].user["Arn"], store.USERS[name])
    session = sts_stores[account_id]["us-east-1"].credentials.get(access_key)
    if session is None or ":assumed-role/" not in session.arn:
        return None
    role = session.arn.split(":assumed-role/", 1)[1].split("/", 1)[0]
    if role not in store.ROLES:
        return None
    return _Principal(store, role, session.arn, store.ROLES[role])


def _arn(context, service: str, resource: str) -> str:
    return f"arn:{context.partition}:{service}:{context.region}:{context.account_id}:{resource}"


def _queue_arn(context, request) -> str:
    if request.get("SourceArn"):  # message move tasks name their source queue by ARN
        return request["SourceArn"]
    name = request.get("QueueName") or urlparse(request.get("QueueUrl") or "").path.rsplit("/", 1)[-1]
    return _arn(context, "sqs", name) if name else "*"


def _table_arn(context, table: str, index: str | None = None) -> str:
    return _arn(context, "dynamodb", f"table/{table}" + (f"/index/{index}" if index else ""))


def _checks(context, prefix: str, operation: str) -> list[tuple[str, str]]:
    """The (action, resource ARN) pairs one request needs, all of them allowed."""
    request = context.service_request or {}
    action = SINGLE_FORM.get(f"{prefix}:{operation}", f"{prefix}:{operation}")
    if prefix == "dynamodb":
        if operation == "TransactWriteItems":
            kinds = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                     "ConditionCheck": "ConditionCheckItem"}
            return [(f"dynamodb:{kinds[kind]}", _table_arn(context, item[kind]["TableName"]))
                    for item in request.get("TransactItems", []) for kind in item if kind in kinds]
        if operation == "TransactGetItems":
            return [("dynamodb:GetItem", _table_arn(context, item["Get"]["TableName"]))
                    for item in request.get("TransactItems", [])]
        if "RequestItems" in request:
            return [(action, _table_arn(context, table)) for table in request["RequestItems"]]
        if "TableName" in request:
            return [(action, _table_arn(context, request["TableName"], request.get("IndexName")))]
        return [(action, "*")]
    if prefix == "sqs":
        return [(action, _queue_arn(context, request))]
    if prefix == "states":
        return [(action, request.get("executionArn") or request.get("stateMachineArn") or "*")]
    if prefix == "cloudwatch" and operation in ("DescribeAlarms", "DescribeAlarmContributors"):
        # Alarms are authorized by their ARNs: each one named (a listing without names is
        # authorized on all of them, "*").
        names = request.get("AlarmNames") or ([request["AlarmName"]] if request.get("AlarmName") else [])
        return [(action, _arn(context, "cloudwatch", f"alarm:{n}")) for n in names] or [(action, "*")]
    if prefix == "scheduler":
        if operation.endswith("ScheduleGroup"):
            return [(action, _arn(context, "scheduler", f"schedule-group/{request['Name']}"))]
        if "ResourceArn" in request:
            return [(action, request["ResourceArn"])]
        if "Name" in request:
            group = request.get("GroupName") or "default"
            checks = [(action, _arn(context, "scheduler", f"schedule/{group}/{request['Name']}"))]
            role = (request.get("Target") or {}).get("RoleArn")
            if role:
                checks.append(("iam:PassRole", role))  # with iam:PassedToService, below
            return checks
        return [(action, "*")]
    return [(action, "*")]


def _allowed(policies, action: str, resource: str, service: str) -> bool:
    from moto.iam.access_control import IAMPolicy, PermissionResult

    # The one condition key this knows: the service a role is passed to (the request's).
    conditions = {"iam:PassedToService": f"{service}.amazonaws.com"}
    allowed = False
    for policy in policies:
        result = IAMPolicy(policy).is_action_permitted(action, resource, None, conditions)
        if result == PermissionResult.DENIED:
            return False
        allowed = allowed or result == PermissionResult.PERMITTED
    return allowed


def check_request(chain, context, response):
    """The request handler: refuses what the signing user's policies do not allow."""
    from localstack.aws.api import CommonServiceException
    from localstack.utils.aws.request_context import extract_access_key_id_from_auth_header

    if context.is_internal_call or context.service is None or context.operation is None:
        return
    key = extract_access_key_id_from_auth_header(context.request.headers)
    if not key:
        return
    user = _principal_of(key, context.account_id, context.region)
    if user is None:
        return
    name = context.service.service_name
    prefix = PREFIX.get(name, context.service.signing_name or name)
    if f"{prefix}:{context.operation.name}" in FREE:
        return
    for action, resource in _checks(context, prefix, context.operation.name):
        allowed = _allowed(user.documents, action, resource, prefix)
        with _lock:
            _decisions.setdefault(user.name, []).append(
                {"action": action, "resource": resource, "allowed": allowed})
        if not allowed:
            raise CommonServiceException(
                DENIED_CODE.get(prefix, "AccessDenied"),
                f"User: {user.arn} is not authorized to perform: {action} on resource: {resource} "
                f"because no identity-based policy allows the {action} action",
                status_code=400 if prefix == "dynamodb" else 403,
                sender_fault=True,
            )


class Decisions:
    """``GET /_localstack/schedkit/iam/<user>``: every decision taken for the user."""

    def on_get(self, request, user: str):
        from localstack.http import Response

        with _lock:
            body = json.dumps(_decisions.get(user, []))
        return Response(body, mimetype="application/json")


def install():
    """Puts the check into LocalStack's gateway and the decisions under its internal API."""
    from localstack.aws import handlers
    from localstack.http import Resource
    from localstack.services.internal import get_internal_apis

    handlers.serve_custom_service_request_handlers.append(check_request)
    get_internal_apis().add(Resource("/_localstack/schedkit/iam/<user>", Decisions()))
