"""Every count and duration of the spec has a maximum, stated in its description and
enforced by offline validation as by the API server; the largest world fits the status."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from multigpu_operator.api.limits import (
    MAX_GPUS_PER_REPLICA,
    MAX_JOB_SECONDS,
    MAX_MICRO_BATCHES,
    MAX_PIPELINE_STAGES,
    MAX_REPLICAS,
    MAX_RETRIES,
    MAX_WAIT_SECONDS,
    MAX_WORLD_SIZE,
)
from multigpu_operator.api.schema import spec_schema
from multigpu_operator.api.spec import JobSpec
from multigpu_operator.api.validation import Problem, validate
from support.crd_specs import ELASTIC, elastic, prop, spec

# Every bounded count and duration: (dotted path under spec, its maximum, a valid spec
# around it).
BOUNDS: list[tuple[str, int, Callable[[int], dict[str, Any]]]] = [
    ("replicas", MAX_REPLICAS, lambda n: spec(replicas=n)),
    ("gpusPerReplica", MAX_GPUS_PER_REPLICA, lambda n: spec(gpusPerReplica=n)),
    (
        "elastic.minReplicas",
        MAX_REPLICAS,
        lambda n: elastic(elastic={"minReplicas": n, "maxReplicas": n}, replicas=n),
    ),
    (
        "elastic.maxReplicas",
        MAX_REPLICAS,
        lambda n: elastic(elastic={"minReplicas": 1, "maxReplicas": n}),
    ),
    ("elastic.maxRestarts", MAX_RETRIES, lambda n: elastic(elastic={**ELASTIC, "maxRestarts": n})),
    (
        "elastic.belowMinTimeoutSeconds",
        MAX_WAIT_SECONDS,
        lambda n: elastic(elastic={**ELASTIC, "belowMinTimeoutSeconds": n}),
    ),
    ("runPolicy.backoffLimit", MAX_RETRIES, lambda n: spec(runPolicy={"backoffLimit": n})),
    (
        "runPolicy.infrastructureRetries",
        MAX_RETRIES,
        lambda n: spec(runPolicy={"infrastructureRetries": n}),
    ),
    (
        "runPolicy.activeDeadlineSeconds",
        MAX_JOB_SECONDS,
        lambda n: spec(runPolicy={"activeDeadlineSeconds": n}),
    ),
    (
        "runPolicy.ttlSecondsAfterFinished",
        MAX_JOB_SECONDS,
        lambda n: spec(runPolicy={"ttlSecondsAfterFinished": n}),
    ),
    ("gang.timeoutSeconds", MAX_WAIT_SECONDS, lambda n: spec(gang={"timeoutSeconds": n})),
    (
        "startPolicy.timeoutSeconds",
        MAX_WAIT_SECONDS,
        lambda n: spec(startPolicy={"timeoutSeconds": n}),
    ),
    ("gang.requeueAfterSeconds", MAX_WAIT_SECONDS, lambda n: spec(gang={"requeueAfterSeconds": n})),
    (
        "runPolicy.stall.deadlineSeconds",
        MAX_WAIT_SECONDS,
        lambda n: spec(runPolicy={"stall": {"deadlineSeconds": n}}),
    ),
    (
        "modelParallel.stages",
        MAX_PIPELINE_STAGES,
        lambda n: spec(mode="ModelParallel", modelParallel={"stages": n}),
    ),
    (
        "modelParallel.microBatches",
        MAX_MICRO_BATCHES,
        lambda n: spec(mode="ModelParallel", modelParallel={"microBatches": n}),
    ),
]


@pytest.mark.parametrize(("path", "most", "build"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_every_count_and_duration_has_a_maximum(
    path: str, most: int, build: Callable[[int], dict[str, Any]]
) -> None:
    assert prop(path)["maximum"] == most
    assert f"At most {most}" in prop(path)["description"]
    assert validate(build(most), "j") == []
    problem = Problem(f"spec.{path}", f"{most + 1} is greater than the maximum of {most}")
    assert problem in validate(build(most + 1), "j")


def test_every_integer_of_the_spec_is_bounded() -> None:
    def integers(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
        if node.get("type") == "integer":
            yield path, node
        for key, sub in node.get("properties", {}).items():
            yield from integers(sub, f"{path}.{key}".lstrip("."))
        if isinstance(node.get("items"), dict):
            yield from integers(node["items"], f"{path}[]")

    found = dict(integers(spec_schema(), ""))
    assert {p for p, node in found.items() if "maximum" not in node} == set()
    # Exit codes (1..255), and a rule's maxRestarts (bounded like backoffLimit).
    rules = "runPolicy.failurePolicy.rules[]"
    others = {"runPolicy.retryableExitCodes[]", f"{rules}.onExitCodes.values[]"}
    others |= {"masterPort", f"{rules}.maxRestarts"}
    assert {b[0] for b in BOUNDS} | others == set(found)
    assert found[f"{rules}.maxRestarts"]["maximum"] == MAX_RETRIES


def test_the_largest_world_fits_the_status_int32() -> None:
    assert MAX_WORLD_SIZE == MAX_REPLICAS * MAX_GPUS_PER_REPLICA < 2**31
    biggest = JobSpec.model_validate(
        spec(replicas=MAX_REPLICAS, gpusPerReplica=MAX_GPUS_PER_REPLICA)
    )
    assert biggest.world_size == MAX_WORLD_SIZE
