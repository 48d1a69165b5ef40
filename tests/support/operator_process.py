"""The operator as a real process (python -m multigpu_operator), for end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from multigpu_operator.local.host import free_port


class OperatorProcess:
    """One operator watching one namespace, so tests stay independent.

    Leader election is off unless `env` turns it on: a lone process needs none, and a
    SIGKILLed one would leave its successor waiting out the Lease. `kueue` is MGJ_KUEUE:
    off unless a test asks, since Kueue's CRDs may be on the shared cluster
    (tests/integration/test_kueue.py) and only those tests queue jobs."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        kueue: str = "off",
    ) -> None:
        self.kubeconfig = kubeconfig
        self.kueue = kueue
        self.namespace = namespace
        self.log_path = log_path
        self.env = {"MGJ_LEADER_ELECTION": "false", **(env or {})}
        self.metrics_port = free_port()
        self.liveness_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> None:
        env = dict(os.environ)
        env.update(
            KUBECONFIG=str(self.kubeconfig),
            MGJ_NAMESPACE=self.namespace,
            MGJ_METRICS_PORT=str(self.metrics_port),
            MGJ_LIVENESS_PORT=str(self.liveness_port),
            MGJ_KUEUE=self.kueue,
            **self.env,
        )
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "multigpu_operator"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"operator exited with {self.proc.returncode}:\n{self.log()}")
            if self._get(f"http://127.0.0.1:{self.liveness_port}/healthz") is not None:
                return
            time.sleep(0.2)
        raise TimeoutError(f"operator not live after {timeout}s:\n{self.log()}")

    def kill(self) -> None:
        """SIGKILL: no cleanup handlers run, as when a node dies under the operator."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a failed test may have left it frozen
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def terminate(self) -> None:
        """SIGTERM without waiting: a graceful stop, as in a rolling update."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()

    def ready(self) -> bool:
        return self._get(f"http://127.0.0.1:{self.metrics_port}/readyz") is not None

    def metrics(self) -> str:
        body = self._get(f"http://127.0.0.1:{self.metrics_port}/metrics")
        if body is None:
            raise RuntimeError("metrics endpoint not reachable")
        return body

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-20000:]

    @staticmethod
    def _get(url: str) -> str | None:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return str(resp.read().decode())
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None


@contextmanager
def replicas(
    kubeconfig: Path,
    namespace: str,
    logs: Path,
    env: Mapping[str, str],
    request: pytest.FixtureRequest,
    count: int = 2,
) -> Iterator[list[OperatorProcess]]:
    """`count` operators (logs a.log, b.log, ... in `logs`) started together, stopped
    afterwards; their logs are printed when the test failed (the integration conftest
    keeps each test's outcome as rep_call)."""
    operators = [
        OperatorProcess(kubeconfig, namespace, logs / f"{chr(ord('a') + i)}.log", env)
        for i in range(count)
    ]
    try:
        for operator in operators:
            operator.start()
        yield operators
    finally:
        for operator in operators:
            operator.stop()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            for operator in operators:
                print(f"--- {operator.log_path.name} ---\n{operator.log()}")
