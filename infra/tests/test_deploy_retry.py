"""Which failed deploys infra/deploy_localstack.py tries again (only those LocalStack caused),
and which it explains as a LocalStack that cannot run Lambda functions."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from deploy_localstack import cannot_run_lambdas, is_localstack_fault  # noqa: E402

# As CI printed it on 2026-11-29 (the URL shortened).
INTERNAL_S3_HOP = (
    "WorkerFunction: Resource provider operation failed: An error occurred (InternalError) "
    "when calling the CreateFunction operation (reached max retries: 4): exception while "
    "calling lambda.CreateFunction: Connection was closed before we received a valid "
    'response from endpoint URL: "http://localhost:4566/awslambda-us-east-1-tasks/'
    'snapshots/000000000000/schedkit-iac-worker?uploadId=x&partNumber=1".'
)


class LocalStackFaults(unittest.TestCase):
    def test_a_dropped_internal_code_upload_is_retried(self):
        self.assertTrue(is_localstack_fault(INTERNAL_S3_HOP))

    def test_a_template_mistake_is_not_retried(self):
        for reason in [
            (
                "WorkerFunction: Resource provider operation failed: An error occurred "
                "(InvalidParameterValueException) when calling the CreateFunction operation: "
                "Unzipped size must be smaller than 262144000 bytes"
            ),
            "JobsQueue: Property VisibilityTimeout: expected integer",
            "schedkit-dev: None",
        ]:
            self.assertFalse(is_localstack_fault(reason), reason)


if __name__ == "__main__":
    unittest.main()


# As a LocalStack without Docker and without schedkit's executor answered, 2026-12-01.
NO_EXECUTOR = "WorkerFunction: Error while creating lambda: Installation of lambda-runtime v0.1.41-pre failed."


class LambdaExecutor(unittest.TestCase):
    def test_a_localstack_that_cannot_run_lambdas_is_recognised(self):
        self.assertTrue(cannot_run_lambdas(NO_EXECUTOR))
        self.assertFalse(is_localstack_fault(NO_EXECUTOR))

    def test_other_failures_are_not(self):
        self.assertFalse(cannot_run_lambdas(INTERNAL_S3_HOP))
        self.assertFalse(cannot_run_lambdas("JobsQueue: Property VisibilityTimeout: expected integer"))
