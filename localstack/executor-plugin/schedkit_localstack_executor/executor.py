"""Runs a Lambda execution environment as host processes: schedkit's Rust init, which
serves the Lambda Runtime API to the function's ``bootstrap``.

LocalStack's own executor starts a Docker container with a Go init it downloads. Here the
init is ``schedkit-lambda-init`` (found through ``SCHEDKIT_LAMBDA_INIT``), started as the
leader of a new process group that the bootstrap shares, so that stopping an environment,
or LocalStack, ends every process it started.
"""

import json
import logging
import os
import platform
import signal
import stat
import subprocess
import threading
import time
from collections import deque
from pathlib import Path

from localstack import config
from localstack.services.lambda_.invocation.executor_endpoint import (
    ExecutorEndpoint,
    StatusErrorException,
)
from localstack.services.lambda_.invocation.lambda_models import (
    FunctionVersion,
    InvocationResult,
)
from localstack.services.lambda_.invocation.runtime_executor import (
    LambdaRuntimeException,
    RuntimeExecutor,
)

LOG = logging.getLogger(__name__)

INIT_VARIABLE = "SCHEDKIT_LAMBDA_INIT"
LOG_LINES_KEPT = 2000
STOP_GRACE_SECONDS = 2.0

# ELF e_machine values of the architectures Lambda offers.
ELF_MACHINES = {62: "x86_64", 183: "arm64"}
HOST_ARCHITECTURES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}


def init_binary() -> str:
    path = os.environ.get(INIT_VARIABLE, "")
    if not path or not os.access(path, os.X_OK):
        raise LambdaRuntimeException(
            f"{INIT_VARIABLE} must name the schedkit-lambda-init binary (it is {path!r}); "
            "localstack/launch.sh builds it and sets it"
        )
    return path


def host_architecture() -> str:
    return HOST_ARCHITECTURES.get(platform.machine().lower(), platform.machine().lower())


def check_bootstrap(bootstrap: Path, architecture: str) -> None:
    """Raises unless ``bootstrap`` is a file this host can execute."""
    if not bootstrap.is_file():
        raise LambdaRuntimeException(
            f"the function's zip has no 'bootstrap' file at its root (looked in {bootstrap.parent})"
        )
    mode = bootstrap.stat().st_mode
    if not mode & stat.S_IXUSR:
        # Zips made without Unix modes lose the executable bit; Lambda runs them anyway.
        bootstrap.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    with bootstrap.open("rb") as f:
        head = f.read(20)
    if head.startswith(b"#!"):
        return
    if not head.startswith(b"\x7fELF") or len(head) < 20:
        raise LambdaRuntimeException("'bootstrap' is neither an ELF executable nor a script")
    byteorder = "little" if head[5] == 1 else "big"
    machine = ELF_MACHINES.get(int.from_bytes(head[18:20], byteorder), f"machine {head[18:20].hex()}")
    host = host_architecture()
    if machine != host:
        raise LambdaRuntimeException(
            f"'bootstrap' is built for {machine}, but this host is {host}: build it for this host"
        )
    if architecture and architecture != host:
        raise LambdaRuntimeException(
            f"the function is declared {architecture}, but this host runs {host} natively"
        )


class NativeRuntimeExecutor(RuntimeExecutor):
    def __init__(self, id: str, function_version: FunctionVersion) -> None:
        super().__init__(id, function_version)
        self.endpoint = ExecutorEndpoint(id, container_address="127.0.0.1")
        self.process: subprocess.Popen | None = None
        self.logs: deque[str] = deque(maxlen=LOG_LINES_KEPT)
        self.current_request: str | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self, env_vars: dict[str, str]) -> None:
        self.endpoint.start()
        code_dir = self.function_version.config.code.get_unzipped_code_location()
        env = {k: str(v) for k, v in env_vars.items() if v is not None}
        env["SCHEDKIT_INIT_CODE_DIR"] = str(code_dir)
        # Host processes need the host's PATH (LocalStack only sets the container's layout).
        env.setdefault("PATH", os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"))
        env["LAMBDA_TASK_ROOT"] = str(code_dir)
        self.process = subprocess.Popen(
            [init_binary()],
            env=env,
            cwd=str(code_dir),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        threading.Thread(target=self._pump_stderr, daemon=True).start()
        line = self.process.stdout.readline().strip()
        if not line.isdigit():
            self.process.wait()
            raise LambdaRuntimeException(
                f"schedkit-lambda-init did not start: {' | '.join(self.logs) or 'no output'}"
            )
        self.endpoint.container_port = int(line)
        threading.Thread(target=self._watch, daemon=True).start()
        self.endpoint.wait_for_startup()

    def stop(self) -> None:
        try:
            self.endpoint.shutdown()
        except Exception as e:  # noqa: BLE001 - stopping goes on regardless
            LOG.debug("executor endpoint shutdown of %s: %s", self.id, e)
        if not self.process:
            return
        # The whole group: the init and the bootstrap it started.
        for sig, grace in ((signal.SIGTERM, STOP_GRACE_SECONDS), (signal.SIGKILL, 0)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and self._group_alive():
                time.sleep(0.05)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            LOG.warning("schedkit-lambda-init %s did not exit", self.process.pid)

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.process.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def _pump_stderr(self) -> None:
        for raw in self.process.stderr:
            self.logs.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def _watch(self) -> None:
        """Notices an init that died, so LocalStack does not wait for it (~15 minutes)."""
        code = self.process.wait()
        startup = self.endpoint.startup_future
        if startup is not None and not startup.done():
            startup.set_exception(
                StatusErrorException(
                    f"schedkit-lambda-init exited with {code} during startup",
                    payload=json.dumps(
                        {"errorType": "Runtime.ExitError", "errorMessage": f"init exited with {code}"}
                    ).encode(),
                )
            )
        invocation = self.endpoint.invocation_future
        if invocation is not None and not invocation.done():
            body = {
                "errorType": "Runtime.ExitError",
                "errorMessage": f"RequestId: {self.current_request} Error: the execution environment exited ({code})",
            }
            invocation.set_result(
                InvocationResult(
                    self.current_request, json.dumps(body).encode(), is_error=True, logs=self.get_logs()
                )
            )

    # --- addresses ------------------------------------------------------------------------

    def get_address(self) -> str:
        return "127.0.0.1"

    def get_endpoint_from_executor(self) -> str:
        return "127.0.0.1"

    def get_runtime_endpoint(self) -> str:
        port = config.GATEWAY_LISTEN[0].port
        return f"http://127.0.0.1:{port}{self.endpoint.get_endpoint_prefix()}"

    # --- invocations ----------------------------------------------------------------------

    def invoke(self, payload: dict[str, str]) -> InvocationResult:
        self.current_request = payload.get("invoke-id")
        return self.endpoint.invoke(payload)

    def get_logs(self) -> str:
        return "\n".join(self.logs)

    # --- versions -------------------------------------------------------------------------

    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        cfg = function_version.config
        if cfg.package_type != "Zip" or not cfg.code:
            raise LambdaRuntimeException("schedkit's executor runs zip packages only")
        runtime = str(cfg.runtime or "")
        if not runtime.startswith("provided"):
            raise LambdaRuntimeException(
                f"schedkit's executor runs provided.al2023 / provided.al2 functions, not {runtime}"
            )
        init_binary()
        cfg.code.prepare_for_execution()
        architecture = str(cfg.architectures[0]) if cfg.architectures else ""
        check_bootstrap(Path(cfg.code.get_unzipped_code_location()) / "bootstrap", architecture)

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        pass

    @classmethod
    def validate_environment(cls) -> bool:
        try:
            init_binary()
        except LambdaRuntimeException as e:
            LOG.warning("schedkit Lambda executor: %s", e)
            return False
        return True
