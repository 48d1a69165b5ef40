"""The reconcile loop: a de-duplicating work queue of jobs, drained by a few workers.

Each reconcile reads the latest job (from kopf's watch) and the job's pods (from the
label-selected pod informer), runs the pure planner and policies, performs the
resulting actions, and writes the status once at the end; events follow a
successful status write. One key is never reconciled by two workers at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from multigpu_operator import metrics
from multigpu_operator.api.spec import Job, Mode
from multigpu_operator.api.validation import validate_object
from multigpu_operator.cluster.api import Kube
from multigpu_operator.cluster.informer import JobKey, PodInformer
from multigpu_operator.plan import DesiredState, PlanError, plan_job
from multigpu_operator.policy.status import (
    Event,
    Phase,
    StatusUpdate,
    count_pods,
    derive_status,
    failed_status,
)
from multigpu_operator.reconcile import plan_actions

log = logging.getLogger(__name__)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Controller:
    def __init__(self, kube: Kube, workers: int = 32, namespace: str | None = None) -> None:
        self.kube = kube
        self.jobs: dict[JobKey, dict[str, Any]] = {}
        self.informer = PodInformer(kube, self.enqueue, namespace)
        self._queue: asyncio.Queue[JobKey] = asyncio.Queue()
        self._queued: set[JobKey] = set()
        self._active: set[JobKey] = set()
        self._dirty: set[JobKey] = set()
        self._services: set[str] = set()  # job UIDs whose Service is known to exist
        self._workers = workers
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self.informer.run(), name="pod-informer"))
        for i in range(self._workers):
            self._tasks.append(asyncio.create_task(self._worker(), name=f"reconcile-{i}"))

    async def stop(self) -> None:
        for task in [*self._tasks, *self._background]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._background, return_exceptions=True)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)  # keep a reference until done, or it may be collected
        task.add_done_callback(self._background.discard)

    async def _post_events(self, body: dict[str, Any], events: tuple[Event, ...]) -> None:
        for event in events:
            await self.kube.post_event(body, event.type, event.reason, event.message)

    # Inputs -----------------------------------------------------------------

    def job_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Called by kopf for every watch event of a MultiGPUJob."""
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if event_type == "DELETED":
            self.jobs.pop(key, None)
            return
        self.jobs[key] = dict(body)
        self.enqueue(key)

    def enqueue(self, key: JobKey) -> None:
        if key in self._active:
            self._dirty.add(key)  # reconcile again once the running pass ends
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    # Workers ----------------------------------------------------------------

    async def _worker(self) -> None:
        await self.informer.synced.wait()
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._active.add(key)
            start = time.perf_counter()
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reconcile of %s/%s failed; retrying", *key)
                metrics.RECONCILE_ERRORS.inc()
                asyncio.get_running_loop().call_later(2.0, self.enqueue, key)
            finally:
                metrics.RECONCILE_DURATION.observe(time.perf_counter() - start)
                self._active.discard(key)
                if key in self._dirty:
                    self._dirty.discard(key)
                    self.enqueue(key)

    async def reconcile(self, key: JobKey) -> None:
        body = self.jobs.get(key)
        if body is None:
            return  # deleted: garbage collection removes the children
        problems = validate_object(body)
        if problems:
            # The API server rejects such a spec; this one was stored before a CRD upgrade
            # or with validation off, so Job.from_object may not read it.
            await self._fail(body, "InvalidSpec", "; ".join(problems))
            return
        job = Job.from_object(body)
        previous = body.get("status") or {}
        try:
            desired = plan_job(job)
        except PlanError as err:
            await self._fail(body, "InvalidSpec", str(err))
            return
        pods = [p for p in self.informer.pods_of(key) if _owned_by(p, job.ref.uid)]
        phase = Phase(previous["phase"]) if previous.get("phase") else None
        actions = plan_actions(desired, pods, phase)
        try:
            if actions.create_pods:
                # The Service and the pods are independent objects: create them together.
                await asyncio.gather(
                    self._ensure_service(job, desired), self._create_pods(job, actions.create_pods)
                )
        except ApiException as err:
            if err.status in (400, 422):
                await self._fail(body, "InvalidPodTemplate", _api_message(err))
                return
            raise
        for name in actions.delete_pods:
            await self.kube.delete_pod(job.ref.namespace, name)
        expected = len(desired.pods)
        update = derive_status(
            job_name=job.ref.name,
            generation=job.generation,
            expected_pods=expected,
            world_size=_world_size(job, desired, pods),
            pods=pods,
            previous=previous,
            now=now_rfc3339(),
            all_created=len(pods) + len(actions.create_pods) >= expected,
        )
        await self._write_status(body, update)

    async def _ensure_service(self, job: Job, desired: DesiredState) -> None:
        if job.ref.uid not in self._services:
            await self.kube.create_service(job.ref.namespace, desired.service)
            self._services.add(job.ref.uid)

    async def _create_pods(self, job: Job, pods: tuple[dict[str, Any], ...]) -> None:
        results = await asyncio.gather(
            *(self.kube.create_pod(job.ref.namespace, pod) for pod in pods),
            return_exceptions=True,
        )
        created = sum(r is True for r in results)
        metrics.PODS_CREATED.inc(created)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _fail(self, body: dict[str, Any], reason: str, message: str) -> None:
        generation = int(body["metadata"].get("generation", 1))
        previous = body.get("status") or {}
        await self._write_status(
            body, failed_status(previous, generation, reason, message, now_rfc3339())
        )

    async def _write_status(self, body: dict[str, Any], update: StatusUpdate) -> None:
        previous = body.get("status") or {}
        if update.status == previous:
            return
        meta = body["metadata"]
        await self.kube.patch_job_status(meta["namespace"], meta["name"], update.status)
        body["status"] = update.status
        if update.events:
            # Events are informational: posting them must not hold up the next reconcile.
            self._spawn(self._post_events(dict(body), update.events))
        if update.entered is not None:
            before = Phase(previous["phase"]) if previous.get("phase") else None
            metrics.job_entered(body, before, update.entered)


def _owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    return any(ref["uid"] == uid for ref in pod["metadata"].get("ownerReferences", []))


def _world_size(job: Job, desired: DesiredState, pods: list[dict[str, Any]]) -> int:
    if job.spec.mode is Mode.ELASTIC:
        # Elastic membership is decided by rendezvous: count the processes of live pods.
        return count_pods(pods).running * job.spec.processes_per_replica
    return desired.world_size or 0


def _api_message(err: ApiException) -> str:
    try:
        return str(json.loads(err.body or "")["message"])
    except (TypeError, ValueError, KeyError):
        return str(err.reason)
