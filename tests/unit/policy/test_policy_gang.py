"""Gang start: enough of an attempt's pods scheduled, or the gang timer and onTimeout
(pure)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import ConditionType, JobStatus, Phase
from multigpu_operator.plan import plan_job
from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.kube.conditions import Event, condition
from multigpu_operator.policy.step import Outcome
from multigpu_operator.policy.steps.gang import NO_NODE_FITS, Scheduling, gang_start, scheduling
from support.policy import (
    GPU_SHORTAGE,
    elastic_job,
    gpu_node,
    job,
    observed,
    pod,
    progress,
    stamp,
    written,
)

SCHEDULED = ConditionType.SCHEDULED
UNSCHEDULABLE = f"1 of 2 pods unscheduled: {GPU_SHORTAGE}"
LATE = f"after gang.timeoutSeconds (60s) {UNSCHEDULABLE}"


def on_node(index: int) -> dict[str, Any]:
    return pod(index, "Running", node="gpu-node-0")


def unschedulable(index: int, message: str = GPU_SHORTAGE) -> dict[str, Any]:
    return pod(index, scheduled="Unschedulable", message=message)


def gated(index: int) -> dict[str, Any]:
    return pod(index, scheduled="SchedulingGated")


@pytest.mark.parametrize(
    ("pods", "state"),
    [
        pytest.param(
            [on_node(0), on_node(1)],
            Scheduling(2, 0, 0, 0, "waiting for the scheduler"),
            id="all-on-nodes",
        ),
        pytest.param(
            [on_node(0), pod(1)],
            Scheduling(1, 1, 0, 0, "waiting for the scheduler"),
            id="not-looked-at-yet",
        ),
        pytest.param(
            [unschedulable(0, "a"), unschedulable(1, "b "), unschedulable(2, "b ")],
            Scheduling(0, 3, 3, 0, "b"),
            id="the-most-common-reason",
        ),
        pytest.param(
            [gated(0), on_node(1)], Scheduling(1, 0, 0, 1, "waiting for the scheduler"), id="gated"
        ),
    ],
)
def test_scheduling(pods: list[dict[str, Any]], state: Scheduling) -> None:
    assert scheduling(pods) == state


@pytest.mark.parametrize(
    ("needed", "shortage"),
    [
        pytest.param(3, "1 of 3 pods unscheduled: why", id="all-needed"),
        pytest.param(2, "1 of 3 pods unscheduled (at least 2 must be scheduled): why", id="fewer"),
    ],
)
def test_shortage(needed: int, shortage: str) -> None:
    assert Scheduling(2, 1, 1, 0, "why").shortage(needed) == shortage


def gang_job(on_timeout: str = "Requeue") -> Job:
    return job(gang={"timeoutSeconds": 60, "onTimeout": on_timeout, "requeueAfterSeconds": 30})


WAITING = JobStatus(unscheduled_since=stamp(0))


@pytest.mark.parametrize(
    ("j", "pods", "previous", "now", "expected"),
    [
        pytest.param(gang_job(), [on_node(0), on_node(1)], {}, 0, Outcome(), id="scheduled"),
        pytest.param(
            gang_job(),
            [on_node(0), on_node(1)],
            {"conditions": [written("Scheduled", False, "Unschedulable")]},
            0,
            Outcome(changes=(condition(SCHEDULED, True, "PodsScheduled", "2 pods scheduled"),)),
            id="scheduled-after-a-wait-is-news",
        ),
        pytest.param(gang_job(), [on_node(0), pod(1)], {}, 0, Outcome(), id="not-looked-at-yet"),
        pytest.param(
            gang_job(),
            [gated(0), gated(1)],
            {},
            3600,
            Outcome(
                changes=(
                    condition(
                        SCHEDULED,
                        False,
                        "SchedulingGated",
                        "2 pods held by a scheduling gate (waiting for admission)",
                    ),
                )
            ),
            id="gated-pods-start-no-timer",
        ),
        pytest.param(
            gang_job(),
            [on_node(0), unschedulable(1)],
            {},
            0,
            Outcome(
                status=WAITING,
                changes=(condition(SCHEDULED, False, "Unschedulable", UNSCHEDULABLE),),
                wake_after=(60.0,),
            ),
            id="the-timer-starts",
        ),
        pytest.param(
            gang_job(),
            [on_node(0), unschedulable(1)],
            WAITING.as_api(),
            45,
            Outcome(
                status=WAITING,
                changes=(condition(SCHEDULED, False, "Unschedulable", UNSCHEDULABLE),),
                wake_after=(15.0,),
            ),
            id="the-timer-runs",
        ),
        pytest.param(
            gang_job("Fail"),
            [on_node(0), unschedulable(1)],
            WAITING.as_api(),
            60,
            fail("GangTimeout", LATE),
            id="timeout-fail",
        ),
        pytest.param(
            gang_job("Wait"),
            [on_node(0), unschedulable(1)],
            WAITING.as_api(),
            60,
            Outcome(
                status=WAITING,
                changes=(condition(SCHEDULED, False, "GangTimeout", f"{LATE}; still waiting"),),
            ),
            id="timeout-wait",
        ),
        pytest.param(
            gang_job("Requeue"),
            [on_node(0), unschedulable(1)],
            WAITING.as_api(),
            60,
            Outcome(
                status=JobStatus.read({"requeueAt": stamp(90)}),
                changes=(
                    condition(
                        SCHEDULED,
                        False,
                        "GangTimeout",
                        f"{LATE}; released its pods, retrying at {stamp(90)}",
                    ),
                ),
                delete_pods=("job-0", "job-1"),
                wake_after=(30,),
                stop=Phase.PENDING,
            ),
            id="timeout-requeue",
        ),
        pytest.param(
            gang_job(),
            [pod(0, "Succeeded", node="n"), unschedulable(1)],
            {},
            0,
            Outcome(
                status=WAITING,
                changes=(
                    condition(
                        SCHEDULED,
                        False,
                        "Unschedulable",
                        f"1 of 1 pods unscheduled: {GPU_SHORTAGE}",
                    ),
                ),
                wake_after=(60.0,),
            ),
            id="finished-pods-are-not-counted",
        ),
        pytest.param(
            elastic_job(3),
            [on_node(0), on_node(1), unschedulable(2)],
            {},
            0,
            Outcome(),
            id="elastic-needs-min-replicas",
        ),
        pytest.param(
            elastic_job(3),
            [on_node(0), unschedulable(1), unschedulable(2)],
            {"createdAttempt": 1, "conditions": [written("Running", False, "BelowMinReplicas")]},
            600,
            Outcome(),
            id="elastic-once-running-is-left-to-below-min",
        ),
    ],
)
def test_gang_start(
    j: Job, pods: list[dict[str, Any]], previous: dict[str, Any], now: float, expected: Outcome
) -> None:
    assert gang_start(observed(j, pods, previous, now), progress()) == expected


NODES = [gpu_node("gpu-node-0"), gpu_node("gpu-node-1")]
NEVER = (
    "no node can ever fit pod job-0: it asks for 16 nvidia.com/gpu, the largest node has 8; "
    f"2 of 2 pods unscheduled: {GPU_SHORTAGE}"
)
NEVER_NOW = f"{NEVER}; the job fails after gang.timeoutSeconds (60s) unless a node that fits joins"
NEVER_LATE = f"after gang.timeoutSeconds (60s) {NEVER}"


def turned_away(j: Job, index: int) -> dict[str, Any]:
    """Pod `index` of `j` as created (its requests, tolerations), reported Unschedulable."""
    created = copy.deepcopy(plan_job(j).pods[index])
    created["status"] = unschedulable(index)["status"]
    return created


def test_the_pod_the_scheduler_turned_away_is_fitted_as_admission_left_it() -> None:
    """A webhook added a toleration for the big node's taint: it may fit there."""
    j = big_job()
    big = gpu_node("big", 16)
    big["spec"]["taints"].append({"key": "team", "value": "a", "effect": "NoSchedule"})
    pods = [turned_away(j, 0), turned_away(j, 1)]
    never = gang_start(observed(j, pods, {}, 0, [*NODES, big]), progress())
    assert never.changes[0] == condition(
        SCHEDULED,
        False,
        NO_NODE_FITS,
        NEVER_NOW.replace("the largest node has 8", "the largest node it may use has 8"),
    )
    for p in pods:
        p["spec"]["tolerations"].append({"key": "team", "operator": "Exists"})
    busy = gang_start(observed(j, pods, {}, 0, [*NODES, big]), progress())
    assert busy.changes[0].reason == "Unschedulable"


def big_job(on_timeout: str = "Requeue") -> Job:
    gang = {"timeoutSeconds": 60, "onTimeout": on_timeout, "requeueAfterSeconds": 30}
    return job(gpusPerReplica=16, gang=gang)


@pytest.mark.parametrize(
    ("j", "previous", "now", "expected"),
    [
        pytest.param(
            big_job(),
            {},
            0,
            Outcome(
                status=WAITING,
                changes=(
                    condition(SCHEDULED, False, NO_NODE_FITS, NEVER_NOW),
                    Event("Warning", NO_NODE_FITS, NEVER_NOW),
                ),
                wake_after=(60.0,),
            ),
            id="said-at-once-and-posted",
        ),
        pytest.param(
            big_job(),
            {**WAITING.as_api(), "conditions": [written("Scheduled", False, NO_NODE_FITS)]},
            30,
            Outcome(
                status=WAITING,
                changes=(condition(SCHEDULED, False, NO_NODE_FITS, NEVER_NOW),),
                wake_after=(30.0,),
            ),
            id="posted-once",
        ),
        pytest.param(
            big_job("Wait"),
            {},
            0,
            Outcome(
                status=WAITING,
                changes=(
                    condition(
                        SCHEDULED,
                        False,
                        NO_NODE_FITS,
                        f"{NEVER}; waiting for a node that fits (gang.onTimeout Wait)",
                    ),
                    Event(
                        "Warning",
                        NO_NODE_FITS,
                        f"{NEVER}; waiting for a node that fits (gang.onTimeout Wait)",
                    ),
                ),
                wake_after=(60.0,),
            ),
            id="wait-says-what-for",
        ),
        pytest.param(
            big_job("Requeue"),
            WAITING.as_api(),
            60,
            fail(NO_NODE_FITS, NEVER_LATE),
            id="not-requeued",
        ),
        pytest.param(
            big_job("Fail"), WAITING.as_api(), 60, fail(NO_NODE_FITS, NEVER_LATE), id="fail"
        ),
        pytest.param(
            big_job("Wait"),
            WAITING.as_api(),
            60,
            Outcome(
                status=WAITING,
                changes=(
                    condition(SCHEDULED, False, NO_NODE_FITS, f"{NEVER_LATE}; still waiting"),
                ),
            ),
            id="wait-keeps-waiting",
        ),
    ],
)
def test_a_job_no_node_can_ever_fit(
    j: Job, previous: dict[str, Any], now: float, expected: Outcome
) -> None:
    pods = [turned_away(j, 0), turned_away(j, 1)]
    assert gang_start(observed(j, pods, previous, now, NODES), progress()) == expected


def test_a_busy_cluster_is_not_a_cluster_too_small() -> None:
    j = job(gpusPerReplica=8, gang={"timeoutSeconds": 60})
    seen = observed(j, [turned_away(j, 0), turned_away(j, 1)], {}, 0, NODES)
    busy = f"2 of 2 pods unscheduled: {GPU_SHORTAGE}"
    assert gang_start(seen, progress()) == Outcome(
        status=WAITING,
        changes=(condition(SCHEDULED, False, "Unschedulable", busy),),
        wake_after=(60.0,),
    )
