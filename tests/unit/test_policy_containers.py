"""Containers the kubelet cannot start: read from container states, put on the Running
condition with the pod, replica, container and image, and posted as a Warning (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.status import ConditionType
from multigpu_operator.policy.conditions import Event, condition
from multigpu_operator.policy.containers import (
    STARTING,
    ContainerProblem,
    container_problems,
    container_states,
)
from multigpu_operator.policy.step import Outcome
from support.policy import observed, pod, progress, written

RUNNING = ConditionType.RUNNING
PULL_MESSAGE = 'rpc error: code = NotFound desc = failed to pull and unpack image "nope:1"'


def waiting(
    index: int,
    reason: str,
    message: str = "",
    *,
    init: bool = False,
    phase: str = "Pending",
    attempt: int = 1,
) -> dict[str, Any]:
    p = pod(index, phase, attempt=attempt)
    state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    key = "initContainerStatuses" if init else "containerStatuses"
    name = "fetch" if init else "trainer"
    p["status"][key] = [{"name": name, "image": "nope:1", "state": state}]
    return p


PULL = ContainerProblem("job-1", 1, "trainer", False, "ErrImagePull", PULL_MESSAGE, "nope:1")
PULL_TEXT = (
    f'pod job-1 (replica 1) container trainer: ErrImagePull (image "nope:1"): {PULL_MESSAGE}'
)


@pytest.mark.parametrize(
    ("pods", "found"),
    [
        pytest.param([pod(0), pod(1)], [], id="nothing-waiting"),
        pytest.param([waiting(0, "ContainerCreating")], [], id="creating-is-progress"),
        pytest.param([pod(0), waiting(1, "ErrImagePull", PULL_MESSAGE)], [PULL], id="pull"),
        pytest.param(
            [waiting(0, "CreateContainerConfigError", 'configmap "c" not found', init=True)],
            [
                ContainerProblem(
                    "job-0",
                    0,
                    "fetch",
                    True,
                    "CreateContainerConfigError",
                    'configmap "c" not found',
                    "nope:1",
                )
            ],
            id="init-container-config",
        ),
        pytest.param([waiting(0, "ImagePullBackOff", phase="Failed")], [], id="finished-pod"),
    ],
)
def test_container_problems(pods: list[dict[str, Any]], found: list[ContainerProblem]) -> None:
    assert container_problems(pods) == found


def test_problem_messages_name_pod_replica_container_and_image() -> None:
    assert PULL.message() == PULL_TEXT
    crash = ContainerProblem("job-0", 0, "sidecar", True, "CrashLoopBackOff", "", "img:2")
    assert crash.message() == "pod job-0 (replica 0) init container sidecar: CrashLoopBackOff"


@pytest.mark.parametrize(
    ("pods", "previous", "outcome"),
    [
        pytest.param([pod(0), pod(1)], {}, Outcome(), id="nothing-to-say"),
        pytest.param(
            [pod(0), waiting(1, "ErrImagePull", PULL_MESSAGE)],
            {},
            Outcome(
                changes=(
                    condition(RUNNING, False, "ErrImagePull", PULL_TEXT),
                    Event("Warning", "ErrImagePull", PULL_TEXT),
                )
            ),
            id="new-problem-is-a-warning",
        ),
        pytest.param(
            [pod(0), waiting(1, "ErrImagePull", PULL_MESSAGE)],
            {
                "conditions": [
                    {**written(RUNNING, False, "ErrImagePull"), "message": PULL_TEXT},
                ]
            },
            Outcome(changes=(condition(RUNNING, False, "ErrImagePull", PULL_TEXT),)),
            id="same-problem-no-second-event",
        ),
        pytest.param(
            [waiting(0, "ImagePullBackOff"), waiting(1, "ImagePullBackOff")],
            {},
            Outcome(
                changes=(
                    condition(
                        RUNNING,
                        False,
                        "ImagePullBackOff",
                        "pod job-0 (replica 0) container trainer: ImagePullBackOff (image "
                        '"nope:1") (and 1 more)',
                    ),
                    Event(
                        "Warning",
                        "ImagePullBackOff",
                        "pod job-0 (replica 0) container trainer: ImagePullBackOff (image "
                        '"nope:1") (and 1 more)',
                    ),
                )
            ),
            id="first-of-several",
        ),
        pytest.param(
            [pod(0, "Running"), pod(1)],
            {"conditions": [written(RUNNING, False, "ImagePullBackOff")]},
            Outcome(changes=(condition(RUNNING, False, STARTING, "1 of 2 pods running"),)),
            id="problem-gone",
        ),
    ],
)
def test_container_states(
    pods: list[dict[str, Any]], previous: dict[str, Any], outcome: Outcome
) -> None:
    assert container_states(observed(pods=pods, previous=previous), progress()) == outcome


def test_pods_of_an_older_attempt_are_not_reported() -> None:
    pods = [waiting(0, "ErrImagePull", attempt=1), pod(0, attempt=2), pod(1, attempt=2)]
    assert container_states(observed(pods=pods), progress(attempt=2)) == Outcome()
