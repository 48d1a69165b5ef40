"""The desired pods whose names are free are created, labelled with the attempt (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.policy.steps.create import missing_pods
from support.policy import job, observed, pod, progress


@pytest.mark.parametrize(
    ("pods", "attempt", "created"),
    [
        pytest.param([], 1, ["job-0", "job-1", "job-2"], id="none-yet"),
        pytest.param([pod(1)], 1, ["job-0", "job-2"], id="some-exist"),
        pytest.param(
            [pod(0, deleting=True), pod(1, attempt=1)],
            2,
            ["job-2"],
            id="a-name-is-reused-only-once-its-pod-is-gone",
        ),
        pytest.param([pod(0), pod(1), pod(2)], 1, [], id="all-exist"),
    ],
)
def test_missing_pods(pods: list[dict[str, Any]], attempt: int, created: list[str]) -> None:
    outcome = missing_pods(observed(job(replicas=3), pods), progress(attempt))
    assert [p["metadata"]["name"] for p in outcome.create_pods] == created
    assert {p["metadata"]["labels"]["multigpu.dev/attempt"] for p in outcome.create_pods} <= {
        str(attempt)
    }
