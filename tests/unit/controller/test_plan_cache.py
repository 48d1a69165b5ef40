"""The controller's plan cache (plan_cache.py): bounded by desired pods, so memory does not
grow with the number of jobs; a job is planned again only when its spec changes or its
plan left the cache (issue 15)."""

from __future__ import annotations

from typing import Any

import pytest

from multigpu_operator.controller import plan_cache
from multigpu_operator.controller.plan_cache import PlanCache
from multigpu_operator.reconcile import plan_object
from support.controller_run import ddp_spec

pytestmark = pytest.mark.asyncio


def job(name: str, replicas: int = 8, generation: int = 1) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": generation}
    return {"metadata": meta, "spec": ddp_spec(replicas=replicas)}


@pytest.fixture
def plannings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the jobs plan_object was run for."""
    seen: list[str] = []

    def counted(body: Any) -> Any:
        seen.append(body["metadata"]["name"])
        return plan_object(body)

    monkeypatch.setattr(plan_cache, "plan_object", counted)
    return seen


async def test_plans_past_the_pod_limit_leave_the_least_recently_used_first(
    plannings: list[str],
) -> None:
    cache = PlanCache(cached_pods=24)
    for name in ("a", "b", "c"):
        await cache.plan(job(name))
    await cache.plan(job("a"))  # used again: now the most recent
    await cache.plan(job("d"))  # 32 pods: the least recently used (b) leaves
    assert (len(cache), cache.pods) == (3, 24)
    assert plannings == ["a", "b", "c", "d"]
    # b left the cache: it is planned again, and c leaves for it.
    await cache.plan(job("b"))
    assert plannings == ["a", "b", "c", "d", "b"]
    assert (len(cache), cache.pods) == (3, 24)


@pytest.mark.parametrize(
    ("change", "planned_again"),
    [
        ({"generation": 2}, True),  # a new spec is planned
        ({}, False),  # the same spec: its plan comes from the cache
    ],
)
async def test_a_new_generation_is_planned_again(
    plannings: list[str], change: dict[str, Any], planned_again: bool
) -> None:
    cache = PlanCache()
    await cache.plan(job("a"))
    await cache.plan(job("a", **change))
    assert plannings == (["a", "a"] if planned_again else ["a"])


async def test_the_newest_plan_stays_whatever_its_size() -> None:
    cache = PlanCache(cached_pods=4)
    await cache.plan(job("small", replicas=2))
    planned = await cache.plan(job("big", replicas=16))
    assert not isinstance(planned, str)
    assert (len(cache), cache.pods) == (1, 16)


async def test_a_forgotten_job_leaves_nothing(plannings: list[str]) -> None:
    cache = PlanCache()
    await cache.plan(job("a"))
    cache.forget("uid-a")
    assert (len(cache), cache.pods) == (0, 0)
    await cache.plan(job("a"))  # a job of the same UID again: planned again
    assert plannings == ["a", "a"]


async def test_a_job_with_a_runtime_is_planned_once_per_copy(plannings: list[str]) -> None:
    runtimes: dict[str, Any] = {}
    cache = PlanCache(runtimes=lambda kind, namespace, name: runtimes.get(name))
    body = job("rt", replicas=2)
    body["spec"] = {"runtimeRef": {"name": "base"}}
    assert await cache.plan(body) == "ClusterMultiGPURuntime base does not exist"
    runtimes["base"] = {"metadata": {"generation": 1}, "spec": ddp_spec(replicas=3)}
    planned = await cache.plan(body)
    assert not isinstance(planned, str)
    assert len(planned[1].pods) == 3
    assert plannings == ["rt"]
    await cache.plan(body)
    assert plannings == ["rt"]  # the same copy: the plan kept
    runtimes["base"] = {"metadata": {"generation": 2}, "spec": ddp_spec(replicas=4)}
    planned = await cache.plan(body)  # no copy in the status yet: the runtime as it is
    assert not isinstance(planned, str)
    assert len(planned[1].pods) == 4
    # Once the status keeps a copy, the runtime's edits change nothing.
    copy = {"kind": "ClusterMultiGPURuntime", "name": "base", "generation": 2}
    body["status"] = {"runtime": {**copy, "spec": ddp_spec(replicas=4)}}
    runtimes["base"] = {"metadata": {"generation": 3}, "spec": ddp_spec(replicas=5)}
    planned = await cache.plan(body)
    assert not isinstance(planned, str)
    assert len(planned[1].pods) == 4
    assert plannings == ["rt", "rt"]
