"""The controller's plan cache (plans.py): bounded by desired pods, so memory does not
grow with the number of jobs, and a plan that left it is rebuilt without validating the
spec again (issue 15)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator import reconcile
from multigpu_operator.api.validation import validate_object
from multigpu_operator.plans import PlanCache
from support.controller_run import ddp_spec

pytestmark = pytest.mark.asyncio


def job(name: str, replicas: int = 8, generation: int = 1) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": generation}
    return {"metadata": meta, "spec": ddp_spec(replicas=replicas)}


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the jobs validate_object was run for."""
    seen: list[str] = []

    def counted(body: Any) -> list[str]:
        seen.append(body["metadata"]["name"])
        return validate_object(body)

    monkeypatch.setattr(reconcile, "validate_object", counted)
    return seen


async def test_plans_past_the_pod_limit_leave_the_least_recently_used_first(
    validations: list[str],
) -> None:
    cache = PlanCache(cached_pods=24)
    for name in ("a", "b", "c"):
        await cache.plan(job(name))
    await cache.plan(job("a"))  # used again: now the most recent
    await cache.plan(job("d"))  # 32 pods: the least recently used (b) leaves
    assert (len(cache), cache.pods) == (3, 24)
    assert validations == ["a", "b", "c", "d"]
    # b is planned again without validating the same spec again; c leaves for it.
    await cache.plan(job("b"))
    assert validations == ["a", "b", "c", "d"]
    assert (len(cache), cache.pods) == (3, 24)


@pytest.mark.parametrize(
    ("change", "validated_again"),
    [
        ({"generation": 2}, True),  # a new spec is validated
        ({}, False),  # the same spec, planned again from the cache
    ],
)
async def test_a_new_generation_is_validated_again(
    validations: list[str], change: dict[str, Any], validated_again: bool
) -> None:
    cache = PlanCache()
    await cache.plan(job("a"))
    await cache.plan(job("a", **change))
    assert validations == (["a", "a"] if validated_again else ["a"])


async def test_the_newest_plan_stays_whatever_its_size() -> None:
    cache = PlanCache(cached_pods=4)
    await cache.plan(job("small", replicas=2))
    planned = await cache.plan(job("big", replicas=16))
    assert not isinstance(planned, str)
    assert (len(cache), cache.pods) == (1, 16)


async def test_a_forgotten_job_leaves_nothing(validations: list[str]) -> None:
    cache = PlanCache()
    await cache.plan(job("a"))
    cache.forget("uid-a")
    assert (len(cache), cache.pods) == (0, 0)
    await cache.plan(job("a"))  # a job of the same UID again: validated again
    assert validations == ["a", "a"]
