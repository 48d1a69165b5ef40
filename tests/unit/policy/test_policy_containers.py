"""Containers the kubelet cannot start: read from container states, put on the Running
condition with the pod, replica, container and image, posted as a Warning, and decided
under spec.startPolicy (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.status import ConditionType, JobStatus
from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.kube.conditions import Event, condition
from multigpu_operator.policy.step import Outcome
from multigpu_operator.policy.steps.containers import (
    STARTING,
    ContainerProblem,
    container_problems,
    container_states,
    summary,
)
from support.policy import elastic_job, job, observed, pod, progress, running, stamp, written

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


WAITS = "; the job fails if this lasts startPolicy.timeoutSeconds (300s)"
SINCE = JobStatus(cannot_start_since=stamp(0))
SEVERAL = 'pod job-0 (replica 0) container trainer: ImagePullBackOff (image "nope:1") (and 1 more)'


@pytest.mark.parametrize(
    ("pods", "previous", "outcome"),
    [
        pytest.param([pod(0), pod(1)], {}, Outcome(), id="nothing-to-say"),
        pytest.param(
            [pod(0), waiting(1, "ErrImagePull", PULL_MESSAGE)],
            {},
            Outcome(
                status=SINCE,
                changes=(
                    condition(RUNNING, False, "ErrImagePull", PULL_TEXT + WAITS),
                    Event("Warning", "ErrImagePull", PULL_TEXT + WAITS),
                ),
                wake_after=(300,),
            ),
            id="new-problem-is-a-warning-and-starts-the-timer",
        ),
        pytest.param(
            [pod(0), waiting(1, "ErrImagePull", PULL_MESSAGE)],
            {
                "conditions": [
                    {**written(RUNNING, False, "ErrImagePull"), "message": PULL_TEXT + WAITS},
                ],
                "cannotStartSince": stamp(-100),
            },
            Outcome(
                status=JobStatus.read({"cannotStartSince": stamp(-100)}),
                changes=(condition(RUNNING, False, "ErrImagePull", PULL_TEXT + WAITS),),
                wake_after=(200,),
            ),
            id="same-problem-no-second-event",
        ),
        pytest.param(
            [waiting(0, "ImagePullBackOff"), waiting(1, "ImagePullBackOff")],
            {},
            Outcome(
                status=SINCE,
                changes=(
                    condition(RUNNING, False, "ImagePullBackOff", SEVERAL + WAITS),
                    Event("Warning", "ImagePullBackOff", SEVERAL + WAITS),
                ),
                wake_after=(300,),
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


INVALID = 'pod job-0 (replica 0) container trainer: InvalidImageName (image "nope:1"): bad'
CONFIG_TEXT = 'pod job-0 (replica 0) container trainer: CreateContainerConfigError: no key "k"'
CRASH = "pod job-0 (replica 0) init container fetch: CrashLoopBackOff"


def problem(text: str, reason: str, note: str, **outcome: Any) -> Outcome:
    """Running=False with `text; note`, posted as a Warning (a problem seen first)."""
    msg = f"{text}; {note}"
    return Outcome(
        changes=(condition(RUNNING, False, reason, msg), Event("Warning", reason, msg)),
        **outcome,
    )


@pytest.mark.parametrize(
    ("start_policy", "pods", "since", "outcome"),
    [
        pytest.param(
            {},
            [waiting(0, "InvalidImageName", "bad"), pod(1)],
            None,
            fail("InvalidImageName", f"{INVALID}; no retry can fix this"),
            id="no-retry-fixes-it-fails-at-once",
        ),
        pytest.param(
            {},
            [waiting(0, "ErrImageNeverPull"), waiting(1, "ErrImagePull")],
            None,
            fail(
                "ErrImageNeverPull",
                'pod job-0 (replica 0) container trainer: ErrImageNeverPull (image "nope:1") '
                "(and 1 more); no retry can fix this",
            ),
            id="the-worst-problem-decides",
        ),
        pytest.param(
            {},
            [waiting(0, "CreateContainerConfigError", 'no key "k"'), pod(1)],
            -299,
            Outcome(
                status=JobStatus.read({"cannotStartSince": stamp(-299)}),
                changes=(
                    condition(RUNNING, False, "CreateContainerConfigError", CONFIG_TEXT + WAITS),
                    Event("Warning", "CreateContainerConfigError", CONFIG_TEXT + WAITS),
                ),
                wake_after=(1,),
            ),
            id="a-missing-config-map-key-waits-for-the-timeout",
        ),
        pytest.param(
            {},
            [waiting(0, "CreateContainerConfigError", 'no key "k"'), pod(1)],
            -300,
            fail(
                "CreateContainerConfigError",
                f"{CONFIG_TEXT}; still failing after startPolicy.timeoutSeconds (300s)",
            ),
            id="then-fails",
        ),
        pytest.param(
            {"timeoutSeconds": 0},
            [waiting(0, "CreateContainerConfigError", 'no key "k"'), pod(1)],
            None,
            fail(
                "CreateContainerConfigError",
                f"{CONFIG_TEXT}; still failing after startPolicy.timeoutSeconds (0s)",
            ),
            id="timeout-zero-fails-at-first-sight",
        ),
        pytest.param(
            {"onTimeout": "Wait"},
            [waiting(0, "CreateContainerConfigError", 'no key "k"'), pod(1)],
            -3600,
            problem(
                CONFIG_TEXT,
                "CreateContainerConfigError",
                "waiting for it to heal (startPolicy.onTimeout Wait)",
                status=JobStatus.read({"cannotStartSince": stamp(-3600)}),
            ),
            id="wait-never-fails",
        ),
        pytest.param(
            {"onTimeout": "Wait"},
            [waiting(0, "InvalidImageName", "bad"), pod(1)],
            None,
            problem(
                INVALID,
                "InvalidImageName",
                "no retry can fix this; waiting (startPolicy.onTimeout Wait)",
            ),
            id="wait-even-for-what-no-retry-fixes",
        ),
        pytest.param(
            {},
            [waiting(0, "CrashLoopBackOff", init=True, phase="Running"), pod(1, "Running")],
            -3600,
            problem(CRASH, "CrashLoopBackOff", "the kubelet keeps restarting it"),
            id="a-crash-loop-is-waited-for-without-a-timer",
        ),
    ],
)
def test_start_policy(
    start_policy: dict[str, Any],
    pods: list[dict[str, Any]],
    since: float | None,
    outcome: Outcome,
) -> None:
    previous = {} if since is None else {"cannotStartSince": stamp(since)}
    seen = observed(job(startPolicy=start_policy), pods, previous)
    assert container_states(seen, progress()) == outcome


ELASTIC_PULL = 'pod job-2 (replica 2) container trainer: ErrImagePull (image "nope:1")'


@pytest.mark.parametrize(
    ("running_message", "outcome"),
    [
        pytest.param(
            "2 pods running",
            Outcome(changes=(Event("Warning", "ErrImagePull", ELASTIC_PULL),)),
            id="posted-once",
        ),
        pytest.param(f"2 pods running; {ELASTIC_PULL}", Outcome(), id="already-said"),
    ],
)
def test_an_elastic_job_that_trains_is_not_held_up(running_message: str, outcome: Outcome) -> None:
    """At least minReplicas pods run: no timer, no failure; policy/steps/status.py puts the
    problem in the Running condition's message."""
    previous = {"conditions": [{**written(RUNNING), "message": running_message}]}
    pods = [*running(0, 1), waiting(2, "ErrImagePull")]
    seen = observed(elastic_job(3), pods, previous)
    assert container_states(seen, progress()) == outcome


def test_the_worst_problem_is_summed_up_first() -> None:
    crash = waiting(0, "CrashLoopBackOff", init=True, phase="Running")
    pull = waiting(1, "ImagePullBackOff")
    assert summary(container_problems([crash, pull])) == (
        'pod job-1 (replica 1) container trainer: ImagePullBackOff (image "nope:1") (and 1 more)'
    )
    assert summary([]) == ""
