"""A job's plan (its desired children), cached per spec, and planning off the event loop.

A job that names a runtime is planned merged with it (policy/runtime_use.py): with the
copy in its status, else the runtime as the cache has it; the plan is kept per copy.

Planning costs about a tenth of a millisecond per pod: jobs of more pods are planned and
decided in a worker thread, so that the event loop keeps serving the watches, the other
jobs, /metrics and /healthz.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import JobStatus
from multigpu_operator.plan import DesiredState
from multigpu_operator.policy.runtime_use import (
    RuntimeUse,
    merged_body,
    runtime_ref,
    runtime_use,
    variant,
)
from multigpu_operator.reconcile import plan_object

T = TypeVar("T")
Planned = tuple[Job, DesiredState] | str
# (kind, namespace, name) -> the runtime, as the cache has it (None: not there).
Runtimes = Callable[[str, str, str], Mapping[str, Any] | None]

INLINE_PODS = 100
# Desired pods kept planned, over all jobs (about 9 KiB each): the jobs passed over most
# recently keep their plans, so memory does not grow with the number of jobs; an older
# job is planned again when it needs a pass.
CACHED_PODS = 1024


async def offload(pods: int, work: Callable[..., T], *args: Any) -> T:
    """`work(*args)`: in the loop for a small job, in a worker thread for a big one."""
    if pods <= INLINE_PODS:
        return work(*args)
    return await asyncio.to_thread(work, *args)


class PlanCache:
    """Plans by job UID, kept while the spec (generation) and labels stay the same (a
    job sees many passes, its spec few changes), the least recently used dropped first
    past CACHED_PODS pods."""

    def __init__(self, cached_pods: int = CACHED_PODS, runtimes: Runtimes | None = None) -> None:
        self._plans: OrderedDict[str, tuple[Any, Planned]] = OrderedDict()
        self._pods = 0  # desired pods in _plans
        self._limit = cached_pods
        self._runtimes = runtimes

    def __len__(self) -> int:
        return len(self._plans)

    @property
    def pods(self) -> int:
        return self._pods

    def forget(self, uid: str) -> None:
        self._drop(uid)

    def runtime_of(self, body: Mapping[str, Any]) -> RuntimeUse | None:
        """The runtime the job `body` is merged with in this pass (None: it names none)."""
        ref = runtime_ref(body)
        if ref is None:
            return None
        namespace = body["metadata"].get("namespace", "")
        found = self._runtimes(ref.kind, namespace, ref.name) if self._runtimes else None
        return runtime_use(ref, JobStatus.read(body.get("status") or {}), found)

    async def plan(self, body: Mapping[str, Any]) -> Planned:
        """The job and its desired children, or why it cannot be planned."""
        meta = body["metadata"]
        uid = meta.get("uid", "")
        use = self.runtime_of(body)
        labels = json.dumps(meta.get("labels"), sort_keys=True)
        key = (meta.get("generation"), labels, variant(use))
        cached = self._plans.get(uid)
        if cached is not None and cached[0] == key:
            self._plans.move_to_end(uid)
            return cached[1]
        if use is not None and use.snapshot is None:
            return f"{use.named} does not exist"  # the job waits (reconcile.decide)
        if use is not None:
            merged = merged_body(body, use)  # the merged job checked: CEL, once per copy
            if isinstance(merged, str):
                return merged
            body = merged
        replicas = (body.get("spec") or {}).get("replicas")
        size = replicas if isinstance(replicas, int) else 1
        planned = await offload(size, plan_object, body)
        self._drop(uid)
        self._plans[uid] = (key, planned)
        self._pods += _pods(planned)
        # The newest plan stays whatever its size: its job's passes are the next ones.
        while self._pods > self._limit and len(self._plans) > 1:
            self._drop(next(iter(self._plans)))
        return planned

    def _drop(self, uid: str) -> None:
        cached = self._plans.pop(uid, None)
        if cached is not None:
            self._pods -= _pods(cached[1])


def _pods(planned: Planned) -> int:
    return 0 if isinstance(planned, str) else len(planned[1].pods)
