"""The plugin LocalStack finds in the ``localstack.lambda.runtime_executor`` namespace.

Selected with ``LAMBDA_RUNTIME_EXECUTOR=schedkit``; loading it imports nothing heavy until
LocalStack asks for the executor class.
"""

from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin


class SchedkitRuntimeExecutorPlugin(RuntimeExecutorPlugin):
    name = "schedkit"

    def load(self, *args, **kwargs):
        from schedkit_localstack_executor.executor import NativeRuntimeExecutor

        return NativeRuntimeExecutor
