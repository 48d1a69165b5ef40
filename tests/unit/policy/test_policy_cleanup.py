"""A finished job stays finished, its pods are cleaned up, its TTL runs out (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.limits import MAX_JOB_SECONDS
from multigpu_operator.api.status import Phase
from multigpu_operator.policy.steps.cleanup import after_finish, stay_finished
from support.policy import job, observed, pod, progress, stamp

PODS = [
    pod(0, "Succeeded", exit_code=0),
    pod(1, "Failed", exit_code=1),
    pod(2, "Running"),
    pod(3, "Pending"),
    pod(4, "Running", deleting=True),
]


@pytest.mark.parametrize(
    ("phase", "stop"),
    [
        pytest.param(None, None, id="new"),
        pytest.param("Running", None, id="running"),
        pytest.param("Suspended", None, id="suspended"),
        pytest.param("Succeeded", Phase.SUCCEEDED, id="succeeded"),
        pytest.param("Failed", Phase.FAILED, id="failed"),
    ],
)
def test_succeeded_and_failed_are_final(phase: str | None, stop: Phase | None) -> None:
    seen = observed(previous={"phase": phase} if phase else {})
    assert stay_finished(seen, progress()).stop == stop


@pytest.mark.parametrize(
    ("policy", "deleted"),
    [
        pytest.param("All", ("job-0", "job-1", "job-2", "job-3"), id="all"),
        pytest.param("Running", ("job-2", "job-3"), id="running-keeps-finished-pods"),
        pytest.param("None", (), id="none"),
    ],
)
def test_clean_pod_policy(policy: str, deleted: tuple[str, ...]) -> None:
    seen = observed(job(runPolicy={"cleanPodPolicy": policy}), PODS)
    assert after_finish(seen).delete_pods == deleted


@pytest.mark.parametrize(
    ("ttl", "previous", "now", "expected"),
    [
        pytest.param(None, {}, 0, {"completion": stamp(0)}, id="kept-finished-now"),
        pytest.param(
            None, {"completionTime": stamp(-60)}, 0, {"completion": stamp(-60)}, id="kept"
        ),
        pytest.param(
            60,
            {"completionTime": stamp(-20)},
            0,
            {"completion": stamp(-20), "wake": (40.0,)},
            id="ttl-counts-from-completion",
        ),
        pytest.param(
            60,
            {"completionTime": stamp(-60)},
            0,
            {"completion": stamp(-60), "delete_job": True},
            id="ttl-passed",
        ),
        pytest.param(
            0, {}, 0, {"completion": stamp(0), "delete_job": True}, id="ttl-zero-deletes-at-once"
        ),
        # The API's largest TTL (bigger ones are refused) is waited for.
        pytest.param(
            MAX_JOB_SECONDS,
            {"completionTime": stamp(-20)},
            0,
            {"completion": stamp(-20), "wake": (MAX_JOB_SECONDS - 20.0,)},
            id="the-largest-ttl-waits",
        ),
    ],
)
def test_completion_time_and_ttl(
    ttl: int | None, previous: dict[str, Any], now: float, expected: dict[str, Any]
) -> None:
    seen = observed(job(runPolicy={"ttlSecondsAfterFinished": ttl}), [], previous, now)
    finished = after_finish(seen)
    assert finished.status.as_api() == {"completionTime": expected["completion"]}
    assert finished.wake_after == expected.get("wake", ())
    assert finished.delete_job is expected.get("delete_job", False)
