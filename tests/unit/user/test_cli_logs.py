"""`mgj logs`, its pure part (client/log_pods.py): which pods, in what order, with what prefix,
and the one-line errors; the command line's exit codes."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator import cli
from multigpu_operator.client.log_pods import (
    LogRequest,
    LogsError,
    container_of,
    finished,
    followed,
    log_params,
    missing_job,
    pod_key,
    pods_of_attempt,
    prefixed,
)
from support.fake_cluster import FakeCluster


def pod(name: str, index: int, attempt: int | None, *containers: str, uid: str = "") -> Any:
    labels = {"multigpu.dev/job-name": "train", "multigpu.dev/replica-index": str(index)}
    if attempt is not None:
        labels["multigpu.dev/attempt"] = str(attempt)
    return {
        "metadata": {"name": name, "uid": uid, "labels": labels},
        "spec": {"containers": [{"name": c} for c in containers or ("trainer",)]},
    }


def names(pods: list[Any]) -> list[str]:
    """name@attempt of each pod, in order."""
    return [
        f"{p['metadata']['name']}@{p['metadata']['labels'].get('multigpu.dev/attempt')}"
        for p in pods
    ]


R = LogRequest("train", "team")
A1 = [pod("train-1", 1, 1), pod("train-0", 0, 1)]
MIXED = [pod("train-10", 10, 2), pod("train-2", 2, 2), pod("train-1", 1, 1), pod("train-0", 0, 2)]


@pytest.mark.parametrize(
    ("request_", "pods", "expected"),
    [
        pytest.param(R, A1, ["train-0@1", "train-1@1"], id="by-replica-index"),
        pytest.param(R, MIXED, ["train-0@2", "train-2@2", "train-10@2"], id="latest-attempt"),
        pytest.param(LogRequest("train", "team", attempt=1), MIXED, ["train-1@1"], id="attempt-1"),
        pytest.param(R, [pod("train-0", 0, None)], ["train-0@None"], id="no-attempt-label"),
    ],
)
def test_pods_of_an_attempt_by_replica_index(
    request_: LogRequest, pods: list[Any], expected: list[str]
) -> None:
    got = pods_of_attempt(request_, pods)
    assert names(got) == expected


@pytest.mark.parametrize(
    ("request_", "pods", "message"),
    [
        pytest.param(R, [], "MultiGPUJob 'train' in namespace 'team' has no pods", id="no-pods"),
        pytest.param(
            LogRequest("train", "team", attempt=3),
            MIXED,
            "MultiGPUJob 'train' in namespace 'team' has no pods of attempt 3; "
            "it has pods of attempt 1, 2",
            id="no-such-attempt",
        ),
    ],
)
def test_no_pods_is_a_one_line_error(request_: LogRequest, pods: list[Any], message: str) -> None:
    with pytest.raises(LogsError) as err:
        pods_of_attempt(request_, pods)
    assert str(err.value) == message


def test_a_missing_job_is_named_with_its_namespace() -> None:
    assert str(missing_job(R)) == "no MultiGPUJob 'train' in namespace 'team'"


@pytest.mark.parametrize(
    ("attempt", "first", "expected"),
    [
        pytest.param(None, 2, ["train-0@2", "train-2@2", "train-10@2"], id="later-attempts"),
        pytest.param(None, 1, ["train-0@2", "train-1@1", "train-2@2", "train-10@2"], id="all"),
        pytest.param(1, 2, ["train-1@1"], id="fixed-attempt"),
    ],
)
def test_followed_pods_include_later_attempts(
    attempt: int | None, first: int, expected: list[str]
) -> None:
    got = followed(LogRequest("train", "team", attempt=attempt), MIXED, first)
    assert names(got) == expected


@pytest.mark.parametrize(
    ("containers", "wanted", "expected"),
    [
        pytest.param(("sidecar", "trainer"), None, "trainer", id="trainer-by-name"),
        pytest.param(("main", "sidecar"), None, "main", id="else-the-first"),
        pytest.param(("sidecar", "trainer"), "sidecar", "sidecar", id="asked-for"),
    ],
)
def test_the_training_container_by_default(
    containers: tuple[str, ...], wanted: str | None, expected: str
) -> None:
    assert container_of(pod("train-0", 0, 1, *containers), wanted) == expected


def test_a_container_the_pod_lacks_is_an_error_naming_those_it_has() -> None:
    with pytest.raises(LogsError) as err:
        container_of(pod("train-0", 0, 1, "a", "trainer"), "x")
    assert str(err.value) == "pod 'train-0' has no container 'x'; its containers: a, trainer"


def test_each_line_is_prefixed_by_pod_and_replica_index() -> None:
    assert prefixed(pod("train-1", 1, 1), "step 1\nstep 2\n") == [
        "[train-1 r1] step 1\n",
        "[train-1 r1] step 2\n",
    ]


@pytest.mark.parametrize(
    ("request_", "follow", "expected"),
    [
        pytest.param(R, False, {"container": "trainer"}, id="plain"),
        pytest.param(
            LogRequest("train", "team", tail=5, timestamps=True),
            True,
            {"container": "trainer", "follow": "true", "tailLines": "5", "timestamps": "true"},
            id="all-options",
        ),
    ],
)
def test_log_query(request_: LogRequest, follow: bool, expected: dict[str, str]) -> None:
    assert log_params(request_, "trainer", follow) == expected


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        ("Succeeded", True),
        ("Failed", True),
        ("Running", False),
        ("Restarting", False),
        (None, False),
    ],
)
def test_following_ends_with_the_job(phase: str | None, expected: bool) -> None:
    assert finished({"status": {"phase": phase}}) is expected


def test_namesakes_of_two_attempts_are_two_pods() -> None:
    assert pod_key(pod("train-0", 0, 1, uid="a")) != pod_key(pod("train-0", 0, 2, uid="b"))
    assert pod_key(pod("train-0", 0, 1)) != pod_key(pod("train-0", 0, 2))


@pytest.mark.parametrize(
    ("error", "code"),
    [(LogsError("no MultiGPUJob 'x' in namespace 'y'"), 1), (KeyboardInterrupt(), 130)],
)
def test_mgj_logs_exit_codes(
    error: BaseException,
    code: int,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[LogRequest] = []

    async def read_logs(cluster: Any, request: LogRequest, out: Any) -> None:
        seen.append(request)
        raise error

    monkeypatch.setattr("multigpu_operator.client.pod_logs.read_logs", read_logs)
    argv = ["logs", "x", "-n", "y", "--attempt", "2", "-c", "trainer", "--tail", "3"]
    assert cli.main(argv, cluster=FakeCluster()) == code
    assert seen == [LogRequest("x", "y", 2, "trainer", 3, False)]
    if code == 1:
        assert capsys.readouterr().err == "error: no MultiGPUJob 'x' in namespace 'y'\n"
