"""The plugin LocalStack finds in the ``localstack.lambda.runtime_executor`` namespace.

Selected with ``LAMBDA_RUNTIME_EXECUTOR=schedkit``; loading it imports nothing heavy until
LocalStack asks for the executor class. A hook beside it marks a LocalStack that runs it.
"""

from localstack.runtime import hooks
from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin


class SchedkitRuntimeExecutorPlugin(RuntimeExecutorPlugin):
    name = "schedkit"

    def load(self, *args, **kwargs):
        from schedkit_localstack_executor.executor import NativeRuntimeExecutor

        return NativeRuntimeExecutor


def _selected() -> bool:
    from localstack import config

    return config.LAMBDA_RUNTIME_EXECUTOR == "schedkit"


@hooks.on_infra_start(should_load=_selected)
def schedkit_executor():
    """Runs nothing: loaded only when this LocalStack runs Lambdas with schedkit's executor,
    it shows as such in ``/_localstack/plugins``, where ``localstack/launch.sh`` looks
    before reusing a LocalStack that it did not start."""


@hooks.on_infra_start()
def schedkit_iam():
    """IAM users' requests checked against their policies (see ``iam.py``): the tests of the
    template's viewer and operator policies need a LocalStack that refuses."""
    from schedkit_localstack_executor.iam import install

    install()
