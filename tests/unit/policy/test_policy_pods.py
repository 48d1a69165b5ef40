"""A job's pods as the operator labels and counts them (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.pod_labels import attempt_of, replica_index, with_attempt
from multigpu_operator.policy.kube.pods import ObservedPodCounts, count_pods
from support.policy import pod


def with_containers(
    p: dict[str, Any], *, sidecar: str | None = None, trainer: str | None = None
) -> dict[str, Any]:
    """`p` with a native sidecar and the trainer, each waiting for the reason given, else
    running."""

    def state(reason: str | None) -> dict[str, Any]:
        return {"waiting": {"reason": reason}} if reason else {"running": {}}

    p["status"]["initContainerStatuses"] = [
        {"name": "sidecar", "restartCount": 3, "state": state(sidecar)}
    ]
    p["status"]["containerStatuses"] = [{"name": "trainer", "state": state(trainer)}]
    return p


def labelled(**labels: str) -> dict[str, Any]:
    return {"metadata": {"name": "p", "labels": labels}}


@pytest.mark.parametrize(
    ("p", "attempt", "index"),
    [
        pytest.param(pod(3, attempt=2), 2, 3, id="labelled"),
        pytest.param(labelled(), 1, -1, id="unlabelled"),
        pytest.param(
            labelled(**{"multigpu.dev/attempt": "x", "multigpu.dev/replica-index": "-2"}),
            1,
            -1,
            id="not-numbers",
        ),
    ],
)
def test_labels(p: dict[str, Any], attempt: int, index: int) -> None:
    assert (attempt_of(p), replica_index(p)) == (attempt, index)


def test_with_attempt_labels_a_copy() -> None:
    original = pod(0, attempt=1)
    relabelled = with_attempt(original, 3)
    assert attempt_of(relabelled) == 3
    assert attempt_of(original) == 1
    assert relabelled["metadata"]["labels"]["multigpu.dev/replica-index"] == "0"


@pytest.mark.parametrize(
    ("pods", "counts"),
    [
        pytest.param([], ObservedPodCounts(), id="none"),
        pytest.param(
            [
                pod(0, "Pending"),
                pod(1, "Running"),
                pod(2, "Succeeded"),
                pod(3, "Failed"),
                pod(4, "Unknown"),
            ],
            ObservedPodCounts(pending=2, running=1, succeeded=1, failed=1),
            id="unknown-counts-as-pending",
        ),
        pytest.param(
            [pod(0, "Running", deleting=True), pod(1, "Running")],
            ObservedPodCounts(running=1),
            id="being-deleted-not-counted",
        ),
        pytest.param(
            [with_containers(pod(0, "Running"), sidecar="CrashLoopBackOff"), pod(1, "Running")],
            ObservedPodCounts(pending=1, running=1),
            id="a-running-pod-whose-sidecar-crash-loops-does-not-run",
        ),
        pytest.param(
            [with_containers(pod(0, "Running"), trainer="ContainerCreating")],
            ObservedPodCounts(pending=1),
            id="nor-one-whose-container-waits",
        ),
        pytest.param(
            [with_containers(pod(0, "Running"), sidecar=None, trainer=None)],
            ObservedPodCounts(running=1),
            id="every-container-running",
        ),
    ],
)
def test_count_pods(pods: list[dict[str, Any]], counts: ObservedPodCounts) -> None:
    assert count_pods(pods) == counts
    assert counts.as_status() == {
        "pending": counts.pending,
        "running": counts.running,
        "succeeded": counts.succeeded,
        "failed": counts.failed,
    }
    assert counts.total == len([p for p in pods if not p["metadata"].get("deletionTimestamp")])
