"""Failed pods as the operator reads them (pure)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from multigpu_operator.policy.failures.failed_pods import Failure, failures, lost_pod
from support.policy import pod


def container(name: str, code: int | None = None) -> dict[str, Any]:
    state = (
        {"terminated": {"exitCode": code, "reason": f"{name}-{code}"}} if code is not None else {}
    )
    return {"name": name, "state": state}


def setup_error_container(code: int, message: str) -> dict[str, Any]:
    term = {"exitCode": code, "reason": "Error", "message": message}
    return {"name": "trainer", "state": {"terminated": term}}


def failed_pod(*containers: dict[str, Any], **status: Any) -> dict[str, Any]:
    p = pod(0, "Failed")
    p["status"].update(containerStatuses=list(containers), **status)
    return p


@pytest.mark.parametrize(
    ("p", "failure"),
    [
        pytest.param(
            pod(1, "Failed", exit_code=137),
            Failure("job-1", "1", 137, "Error", "uid-1-1"),
            id="the-trainer-exit-code",
        ),
        pytest.param(
            failed_pod(container("sidecar", 0), container("trainer", 3)),
            Failure("job-0", "0", 3, "trainer-3", "uid-0-1"),
            id="the-trainer-not-a-sidecar",
        ),
        pytest.param(
            failed_pod(container("sidecar", 2), container("trainer")),
            Failure("job-0", "0", 2, "sidecar-2", "uid-0-1"),
            id="a-failed-container-when-the-trainer-has-not-ended",
        ),
        pytest.param(
            failed_pod(reason="Evicted"),
            Failure("job-0", "0", None, "Evicted", "uid-0-1"),
            id="the-pod-reason-without-containers",
        ),
        pytest.param(
            failed_pod(setup_error_container(78, "SetupError: MGJ_PIPELINE_STAGES=4 but ...")),
            Failure(
                "job-0",
                "0",
                78,
                "SetupError",
                "uid-0-1",
                False,
                "MGJ_PIPELINE_STAGES=4 but ...",
                True,
            ),
            id="a-setup-error-by-its-exit-code-with-the-trainers-message",
        ),
        pytest.param(
            # torchrun exits 1 whatever its worker did; the worker's message says it.
            failed_pod(setup_error_container(1, "SetupError: no CUDA device is visible")),
            Failure(
                "job-0",
                "0",
                1,
                "SetupError",
                "uid-0-1",
                False,
                "no CUDA device is visible",
                True,
            ),
            id="a-setup-error-under-torchrun-by-its-message",
        ),
        pytest.param(
            failed_pod(setup_error_container(1, "some other message")),
            Failure("job-0", "0", 1, "Error", "uid-0-1"),
            id="another-message-is-no-setup-error",
        ),
        pytest.param(
            pod(2, "Failed", disrupted=True),
            Failure("job-2", "2", None, "disrupted (PodGC)", "uid-2-1", disrupted=True),
            id="disrupted-from-outside",
        ),
    ],
)
def test_what_a_failed_pod_says(p: dict[str, Any], failure: Failure) -> None:
    assert [told(f) for f in failures([p])] == [failure]


def told(failure: Failure) -> Failure:
    """What the pod says of itself, without what the rules match on and the fault
    (tests/unit/policy/test_policy_faults.py)."""
    return replace(failure, reasons=(), conditions=(), node="", diagnosis=None)


EVICTION = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi."
OOM_ADVICE = (
    "container trainer used more memory than its limit; raise its resources.limits.memory in "
    "spec.template (a memory-backed /dev/shm, spec.shmSize, counts against it too)"
)


def oom_killed() -> dict[str, Any]:
    term = {"exitCode": 137, "reason": "OOMKilled"}
    return failed_pod({"name": "trainer", "state": {"terminated": term}})


def disrupted(message: str) -> dict[str, Any]:
    p = pod(2, "Failed")
    p["status"].update(reason="Evicted", message=EVICTION)
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}
    p["status"]["conditions"] = [{**condition, "message": message} if message else condition]
    return p


@pytest.mark.parametrize(
    ("p", "failure", "message"),
    [
        pytest.param(
            oom_killed(),
            Failure("job-0", "0", 137, "OOMKilled", "uid-0-1", detail=OOM_ADVICE),
            f"pod job-0 (replica 0) failed with exit code 137: OOMKilled: {OOM_ADVICE}",
            id="oom-killed-says-to-raise-the-memory-limit",
        ),
        pytest.param(
            failed_pod(container("trainer", 137), reason="Evicted", message=f" {EVICTION}\n"),
            Failure("job-0", "0", None, "Evicted", "uid-0-1", detail=EVICTION),
            f"pod job-0 (replica 0) failed: Evicted: {EVICTION}",
            id="an-eviction-has-no-exit-code-and-the-kubelets-message",
        ),
        pytest.param(
            disrupted("Pod was terminated in response to imminent node shutdown."),
            Failure(
                "job-2",
                "2",
                None,
                "disrupted (TerminationByKubelet)",
                "uid-2-1",
                disrupted=True,
                detail="Pod was terminated in response to imminent node shutdown.",
            ),
            "pod job-2 (replica 2) failed: disrupted (TerminationByKubelet): Pod was terminated "
            "in response to imminent node shutdown.",
            id="disruption-with-its-message",
        ),
        pytest.param(
            disrupted(""),
            Failure(
                "job-2",
                "2",
                None,
                "disrupted (TerminationByKubelet)",
                "uid-2-1",
                disrupted=True,
                detail=EVICTION,
            ),
            f"pod job-2 (replica 2) failed: disrupted (TerminationByKubelet): {EVICTION}",
            id="disruption-without-one-takes-the-pods",
        ),
    ],
)
def test_what_the_user_can_do_is_in_the_message(
    p: dict[str, Any], failure: Failure, message: str
) -> None:
    (found,) = failures([p])
    assert told(found) == failure
    assert found.message() == message
    # lastFailure keeps the short reason.
    assert found.as_status(1).reason == failure.reason


def test_failures_first_finished_first_running_pods_ignored() -> None:
    pods = [
        pod(0, "Failed", exit_code=1, finished=20),
        pod(1, "Running"),
        pod(2, "Failed", exit_code=1, finished=10),
        pod(3, "Failed", exit_code=1, finished=10),
    ]
    assert [f.pod for f in failures(pods)] == ["job-2", "job-3", "job-0"]


@pytest.mark.parametrize(
    ("failure", "message", "status"),
    [
        pytest.param(
            Failure("job-1", "1", 137, "OOMKilled"),
            "pod job-1 (replica 1) failed with exit code 137: OOMKilled",
            {"pod": "job-1", "replicaIndex": 1, "exitCode": 137, "reason": "OOMKilled"},
            id="exit-code",
        ),
        pytest.param(
            lost_pod("job-0", 0),
            "pod job-0 (replica 0) failed: pod deleted (node lost, evicted or deleted by hand)",
            {
                "pod": "job-0",
                "replicaIndex": 0,
                "exitCode": None,
                "reason": "pod deleted (node lost, evicted or deleted by hand)",
            },
            id="lost",
        ),
        pytest.param(
            Failure("x", "?", 1, "Error"),
            "pod x (replica ?) failed with exit code 1: Error",
            {"pod": "x", "replicaIndex": None, "exitCode": 1, "reason": "Error"},
            id="no-replica-label",
        ),
    ],
)
def test_how_a_failure_is_told(failure: Failure, message: str, status: dict[str, Any]) -> None:
    assert failure.message() == message
    stated = failure.as_status(4).model_dump(by_alias=True, exclude_unset=True)
    assert stated == {**status, "attempt": 4}
