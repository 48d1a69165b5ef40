"""Reading pods: counts by phase and the first failure (pure)."""

from __future__ import annotations

from typing import Any

from multigpu_operator.policy.failures.failed_pods import first_failure
from multigpu_operator.policy.kube.pods import count_pods

NOW = "2026-11-22T10:00:00Z"


def pod(index: int, phase: str, exit_code: int | None = None, reason: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if exit_code is not None:
        status["containerStatuses"] = [
            {
                "name": "trainer",
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": reason,
                        "finishedAt": f"2026-11-22T09:00:0{index}Z",
                    }
                },
            }
        ]
    return {
        "metadata": {"name": f"job-{index}", "labels": {"multigpu.dev/replica-index": str(index)}},
        "status": status,
    }


def test_the_first_failure_is_reported_when_several_ranks_fail() -> None:
    failure = first_failure([pod(1, "Failed", 1, "Error"), pod(0, "Failed", 134, "Error")])
    assert failure is not None
    assert (failure.pod, failure.exit_code) == ("job-0", 134)


def test_pods_being_deleted_are_not_counted() -> None:
    leaving = pod(0, "Running")
    leaving["metadata"]["deletionTimestamp"] = NOW
    assert count_pods([leaving, pod(1, "Running")]).running == 1
