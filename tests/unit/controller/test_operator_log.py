"""The integration tests' log checker (tests/support/operator_log.py) fires on the lines
it is there for, and only on those: fed known warning, error and traceback lines."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from support.operator_log import assert_calm, refusals, troubles, troubles_in
from support.operator_process import OperatorProcess

T = "[2026-11-22 02:05:47,403]"
WARNING = f"{T} multigpu_operator.co [WARNING ] could not post event PodsCreated on j: x"
ERROR = (
    f"{T} multigpu_operator.co [ERROR   ] reconcile of ns/j failed: HTTP 403: pods is "
    "forbidden; retrying in 1s"
)
CRITICAL = f"{T} multigpu_operator.el [CRITICAL] the Lease is gone"
TRACEBACK = "Traceback (most recent call last):"
GROUP_TRACEBACK = "  + Exception Group Traceback (most recent call last):"
KOPF_WARNING = f"{T} kopf._core.reactor [WARNING ] Not enough permissions to watch for pods"
KOPF_RETRY = f"{T} kopf._cogs.clients [ERROR   ] Request attempt 1 failed; will retry: GET"
# Calm: what a timestamp, a job or a pod's own message can put into an INFO line.
CALM = [
    f"{T} kopf.activities.pro [INFO    ] Activity 'podWatchAgeSeconds' succeeded.",
    f"{T} multigpu_operator.co [INFO    ] ns/error-403 waits: WARNING quota; looking again",
    f"{T} multigpu_operator.co [INFO    ] ns/j failed: pod j-0 said Traceback (most recent",
    '  File "/app/train.py", line 403, in main',
    "ValueError: an ERROR the trainer raised",
]


@pytest.mark.parametrize(
    "line",
    [WARNING, ERROR, CRITICAL, TRACEBACK, GROUP_TRACEBACK],
    ids=["warning", "error", "critical", "traceback", "exception-group"],
)
def test_each_kind_of_trouble_is_found(line: str) -> None:
    assert troubles_in([*CALM, line, *CALM]) == [line]


def test_calm_lines_are_not_trouble() -> None:
    assert troubles_in(CALM) == []
    assert troubles_in(CALM, loggers="") == []


def test_kopf_warnings_count_only_when_every_logger_is_asked_for() -> None:
    assert troubles_in([KOPF_WARNING]) == []
    assert troubles_in([KOPF_WARNING], loggers="") == [KOPF_WARNING]


class _Metrics(BaseHTTPRequestHandler):
    errors = 0.0

    def do_GET(self) -> None:
        body = (
            f"# TYPE mgj_reconcile_errors_total counter\nmgj_reconcile_errors_total {self.errors}\n"
        )
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def operator(tmp_path: Path) -> Iterator[OperatorProcess]:
    """An operator never started: its log file and a /metrics the test serves."""
    process = OperatorProcess(tmp_path / "kubeconfig", "ns", tmp_path / "operator.log")
    server = ThreadingHTTPServer(("127.0.0.1", process.metrics_port), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield process
    finally:
        server.shutdown()
        server.server_close()
        _Metrics.errors = 0.0


def test_assert_calm_passes_a_calm_log(operator: OperatorProcess) -> None:
    operator.log_path.write_text("\n".join(CALM) + "\n")
    assert_calm(operator)


@pytest.mark.parametrize("line", [WARNING, ERROR, TRACEBACK], ids=["warning", "error", "traceback"])
def test_assert_calm_fires_on_a_trouble_line(operator: OperatorProcess, line: str) -> None:
    operator.log_path.write_text("\n".join([*CALM, line]) + "\n")
    assert troubles(operator) == [line]
    with pytest.raises(AssertionError):
        assert_calm(operator)


def test_refusals_are_ours_and_kopfs_about_permissions(operator: OperatorProcess) -> None:
    operator.log_path.write_text("\n".join([*CALM, KOPF_RETRY, KOPF_WARNING, ERROR]) + "\n")
    assert refusals(operator) == [ERROR, KOPF_WARNING]


def test_assert_calm_fires_on_a_counted_reconcile_error(operator: OperatorProcess) -> None:
    operator.log_path.write_text("\n".join(CALM) + "\n")
    _Metrics.errors = 1.0
    with pytest.raises(AssertionError):
        assert_calm(operator)
