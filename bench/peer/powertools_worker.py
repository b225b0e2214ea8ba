"""The benchmark's peer: schedkit's `record-invoice` job written with Powertools for AWS
Lambda (Python) as its documentation shows it, an SQS batch handler
(`BatchProcessor` + `process_partial_response`) whose record handler is an
`idempotent_function` backed by `DynamoDBPersistenceLayer`, then the same effect write
as schedkit's (one `UpdateItem` on the effects table, `ADD applied :one`).

As a Lambda function (`lambda_handler`, which `bootstrap` runs under awslambdaric) it is
what a team would deploy. As a script it runs as schedkit's worker does in polling mode:
receive up to 10 messages, hand them to the handler as Lambda's SQS event, delete the ones
not reported as failures; until the queue is drained. At the end it prints one JSON line:
what it processed and its own CPU time and peak memory.

    PEER_QUEUE_URL=... PEER_IDEMPOTENCY_TABLE=... PEER_EFFECTS_TABLE=... \\
        python powertools_worker.py
"""

import json
import os
import resource
import time
from datetime import UTC, datetime

import boto3
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

QUEUE_URL = os.environ["PEER_QUEUE_URL"]
EFFECTS_TABLE = os.environ["PEER_EFFECTS_TABLE"]

processor = BatchProcessor(event_type=EventType.SQS)
persistence = DynamoDBPersistenceLayer(table_name=os.environ["PEER_IDEMPOTENCY_TABLE"])
# The run's identity is schedkit's key template for invoices: billing month and tenant.
config = IdempotencyConfig(
    event_key_jmespath="powertools_json(body).payload.[billing_month, tenant]"
)
dynamodb = boto3.client("dynamodb")
sqs = boto3.client("sqs")


def invoice_key(payload):
    return f"invoice:{payload['billing_month']}:{payload['tenant']}"


@idempotent_function(
    data_keyword_argument="record", config=config, persistence_store=persistence
)
def record_handler(record: SQSRecord):
    envelope = json.loads(record.body)
    payload = envelope["payload"]
    # How long rendering the invoice takes before the write (schedkit's job reads the same
    # field): the I/O-bound batch of the benchmark waits 50 ms per invoice.
    render = float(payload.get("render_seconds", 0))
    if render > 0:
        time.sleep(render)
    dynamodb.update_item(
        TableName=EFFECTS_TABLE,
        Key={"effect_key": {"S": invoice_key(payload)}},
        UpdateExpression="SET tenant = :t, amount_cents = :a, written_at = :w ADD applied :one",
        ExpressionAttributeValues={
            ":t": {"S": json.dumps(payload["tenant"])},
            ":a": {"N": str(int(payload["amount_cents"]))},
            ":w": {"S": datetime.now(UTC).isoformat()},
            ":one": {"N": "1"},
        },
    )
    return {"amount_cents": payload["amount_cents"]}


def lambda_handler(event, context):
    config.register_lambda_context(context)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )


class Context:
    """What Lambda passes a handler, as much of it as Powertools reads."""

    function_name = "powertools-peer"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:powertools-peer"
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self):
        return 60_000


def as_event(messages):
    """Lambda's SQS event for received messages."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:bench",
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


def drained():
    attributes = sqs.get_queue_attributes(
        QueueUrl=QUEUE_URL,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return all(int(v) == 0 for v in attributes.values())


def main():
    started = time.monotonic()
    context = Context()
    received = failed = 0
    while True:
        messages = sqs.receive_message(
            QueueUrl=QUEUE_URL,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            AttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            if drained():
                break
            continue
        received += len(messages)
        response = lambda_handler(as_event(messages), context)
        failures = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        failed += len(failures)
        done = [m for m in messages if m["MessageId"] not in failures]
        if done:
            sqs.delete_message_batch(
                QueueUrl=QUEUE_URL,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(done)
                ],
            )
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "received": received,
                "failed": failed,
                "wall_seconds": time.monotonic() - started,
                "cpu_seconds": usage.ru_utime + usage.ru_stime,
                "peak_rss_kb": usage.ru_maxrss,
            }
        )
    )


if __name__ == "__main__":
    main()
