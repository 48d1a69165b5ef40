"""Elastic size: scale to spec.replicas, and the grace below minReplicas (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import ConditionType, JobStatus
from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.kube.conditions import Event, cleared
from multigpu_operator.policy.step import Outcome
from multigpu_operator.policy.steps.elastic import elastic_size
from support.policy import elastic_job, job, observed, pod, progress, running, stamp, written

HAS_RUN = {"conditions": [written("Running", True, "PodsRunning")]}
BELOW = "1 of at least elastic.minReplicas (2) pods running"


def grace(on_below_min: str = "Fail") -> Job:
    return elastic_job(3, elastic={"belowMinTimeoutSeconds": 120, "onBelowMin": on_below_min})


def below(message: str, wake: tuple[float, ...] = (), since: float = 0) -> Outcome:
    return Outcome(
        status=JobStatus.read({"belowMinSince": stamp(since)}),
        changes=(cleared(ConditionType.RUNNING, "BelowMinReplicas", message),),
        wake_after=wake,
    ).then(Outcome(status=JobStatus.read({"targetReplicas": 3})))


@pytest.mark.parametrize(
    ("j", "pods", "previous", "now", "expected"),
    [
        pytest.param(job(), running(0), {}, 0, Outcome(), id="not-elastic"),
        pytest.param(
            elastic_job(3),
            running(0, 1, 2),
            HAS_RUN,
            0,
            Outcome(status=JobStatus.read({"targetReplicas": 3})),
            id="at-size",
        ),
        pytest.param(
            elastic_job(2),
            running(0, 1, 2, 3),
            {**HAS_RUN, "targetReplicas": 4},
            0,
            Outcome(
                status=JobStatus.read({"targetReplicas": 2}),
                delete_pods=("job-3", "job-2"),
                changes=(Event("Normal", "Scaled", "scaled from 4 to 2 pods"),),
            ),
            id="scale-down-highest-index-first",
        ),
        pytest.param(
            elastic_job(4),
            running(0, 1),
            {**HAS_RUN, "targetReplicas": 2},
            0,
            Outcome(
                status=JobStatus.read({"targetReplicas": 4}),
                changes=(Event("Normal", "Scaled", "scaled from 2 to 4 pods"),),
            ),
            id="scale-up-creates-later",
        ),
        pytest.param(
            grace(),
            [*running(0), pod(1), pod(2)],
            {},
            0,
            Outcome(status=JobStatus.read({"targetReplicas": 3})),
            id="below-min-before-it-ever-ran-is-the-gangs",
        ),
        pytest.param(
            grace(),
            [*running(0), pod(1), pod(2)],
            HAS_RUN,
            0,
            below(BELOW, (120.0,)),
            id="below-min-starts-the-grace",
        ),
        pytest.param(
            grace(),
            [*running(0), pod(1), pod(2)],
            {**HAS_RUN, "belowMinSince": stamp(0)},
            100,
            below(BELOW, (20.0,)),
            id="below-min-grace-runs",
        ),
        pytest.param(
            grace("Fail"),
            [*running(0), pod(1), pod(2)],
            {**HAS_RUN, "belowMinSince": stamp(0)},
            120,
            fail("BelowMinReplicas", f"{BELOW} for 120s"),
            id="below-min-fail",
        ),
        pytest.param(
            grace("Wait"),
            [*running(0), pod(1), pod(2)],
            {**HAS_RUN, "belowMinSince": stamp(0)},
            120,
            below(f"{BELOW}; waiting for capacity"),
            id="below-min-wait",
        ),
    ],
)
def test_elastic_size(
    j: Job, pods: list[dict[str, Any]], previous: dict[str, Any], now: float, expected: Outcome
) -> None:
    assert elastic_size(observed(j, pods, previous, now), progress()) == expected
