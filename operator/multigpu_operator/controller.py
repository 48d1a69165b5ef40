"""The reconcile loop: a de-duplicating work queue of jobs, drained by a few workers.

Each reconcile reads the latest job (from kopf's watch) and the job's pods (from the
label-selected pod informer), runs the pure planner and policies, performs the
resulting actions, and writes the status once at the end; events follow a
successful status write. One key is never reconciled by two workers at once.

The cluster is reached only through the cluster.protocol.Cluster it is given, and
fails only with cluster/errors.py's errors: tests run it against an in-memory fake.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any

from multigpu_operator import metrics
from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import Phase
from multigpu_operator.api.validation import validate_object
from multigpu_operator.cluster.errors import Conflict, Invalid
from multigpu_operator.cluster.informer import JobKey, PodInformer
from multigpu_operator.cluster.nodes import NodeInformer
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.plan import DesiredState, PlanError, plan_job
from multigpu_operator.policy.conditions import Event
from multigpu_operator.policy.fail import invalid_job
from multigpu_operator.policy.step import StatusUpdate
from multigpu_operator.reconcile import decide
from multigpu_operator.settings import Settings
from multigpu_operator.workqueue import Backoff, WorkQueue

log = logging.getLogger(__name__)

# A job whose status write lost a race is looked at again this soon (the watch usually
# brings the newer version first).
CONFLICT_RETRY_SECONDS = 1.0


def utc_now() -> datetime:
    return datetime.now(UTC)


class Controller:
    def __init__(
        self,
        cluster: Cluster,
        settings: Settings,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.cluster = cluster
        self.jobs: dict[JobKey, dict[str, Any]] = {}
        self.informer = PodInformer(cluster, self.enqueue, settings.namespace)
        # For telling "no node can ever fit" from "the cluster is busy" (policy/fit.py).
        self.nodes = NodeInformer(cluster)
        self.queue: WorkQueue[JobKey] = WorkQueue(
            Backoff(settings.retry_base_seconds, settings.retry_max_seconds)
        )
        self._clock = clock  # the time decisions and timestamps are made at
        self._services: set[str] = set()  # job UIDs whose Service is known to exist
        self._workers = settings.workers
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._plans: dict[str, tuple[Any, tuple[Job, DesiredState] | str]] = {}  # by job UID

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self.informer.run(), name="pod-informer"))
        self._tasks.append(asyncio.create_task(self.nodes.run(), name="node-informer"))
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
            await self.cluster.post_event(body, event.type, event.reason, event.message)

    # Inputs -----------------------------------------------------------------

    def job_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Called by kopf for every watch event of a MultiGPUJob."""
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if event_type == "DELETED":
            self.jobs.pop(key, None)
            self._plans.pop(body["metadata"].get("uid", ""), None)
            self._services.discard(body["metadata"].get("uid", ""))
            self.queue.discard(key)
            return
        known = self.jobs.get(key)
        if known is not None and _older(body, known):
            return  # our own status write already gave us a newer version
        self.jobs[key] = dict(body)
        self.enqueue(key)

    def enqueue(self, key: JobKey) -> None:
        """Reconcile `key` soon (once more after the running pass, if one is running)."""
        self.queue.add(key)

    # Workers ----------------------------------------------------------------

    async def _worker(self) -> None:
        await self.informer.synced.wait()
        while True:
            key = await self.queue.get()
            start = time.perf_counter()
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                delay = self.queue.retry(key)
                log.exception("reconcile of %s/%s failed; retrying in %.0fs", *key, delay)
                metrics.RECONCILE_ERRORS.inc()
            else:
                self.queue.forget(key)
            finally:
                metrics.RECONCILE_DURATION.observe(time.perf_counter() - start)
                self.queue.done(key)

    async def reconcile(self, key: JobKey) -> None:
        body = self.jobs.get(key)
        if body is None:
            return  # deleted: garbage collection removes the children
        planned = self._plan(body)
        if isinstance(planned, str):
            await self._fail(body, "InvalidSpec", planned)
            return
        job, desired = planned
        pods = [p for p in self.informer.pods_of(key) if _owned_by(p, job.ref.uid)]
        previous = body.get("status") or {}
        decision = decide(job, desired, pods, previous, self._clock(), self.nodes.nodes())
        # Counters first: once the status says "attempt 3", a crash cannot make it 2 again.
        update = StatusUpdate(decision.status, decision.events, decision.entered)
        if not await self._write_status(body, update):
            return
        if decision.restarts:
            metrics.RESTARTS.labels(job.ref.namespace, job.spec.mode.value).inc(decision.restarts)
        uids = {p["metadata"]["name"]: p["metadata"].get("uid") for p in pods}
        await asyncio.gather(
            *(
                self.cluster.delete_pod(job.ref.namespace, name, uids.get(name))
                for name in decision.delete_pods
            )
        )
        try:
            if decision.create_pods:
                # The Service and the pods are independent objects: create them together.
                await asyncio.gather(
                    self._ensure_service(job, desired),
                    self._create_pods(job, decision.create_pods),
                )
        except Invalid as err:
            await self._fail(body, "InvalidPodTemplate", err.message)
            return
        if decision.delete_job:
            log.info("deleting %s/%s: ttlSecondsAfterFinished passed", *key)
            await self.cluster.delete_job(job.ref.namespace, job.ref.name, job.ref.uid)
        if decision.requeue_after is not None:
            self._wake(key, decision.requeue_after)

    def _plan(self, body: Mapping[str, Any]) -> tuple[Job, DesiredState] | str:
        """The job and its desired children, or why it cannot be planned. Cached per
        spec (generation) and labels: a job sees many passes, its spec few changes."""
        meta = body["metadata"]
        key = (meta.get("generation"), json.dumps(meta.get("labels"), sort_keys=True))
        cached = self._plans.get(meta.get("uid", ""))
        if cached is not None and cached[0] == key:
            return cached[1]
        planned: tuple[Job, DesiredState] | str
        problems = validate_object(body)
        if problems:
            # The API server rejects such a spec; this one was stored before a CRD upgrade
            # or with validation off, so Job.from_object may not read it.
            planned = "; ".join(problems)
        else:
            job = Job.from_object(body)
            try:
                planned = (job, plan_job(job))
            except PlanError as err:
                planned = str(err)
        self._plans[meta.get("uid", "")] = (key, planned)
        return planned

    def _wake(self, key: JobKey, delay: float) -> None:
        """Reconcile `key` again after `delay` seconds; one timer per job, the earliest."""
        # A little late rather than early: timestamps in the status have whole seconds.
        self.queue.add_after(key, delay + 0.5)

    async def _ensure_service(self, job: Job, desired: DesiredState) -> None:
        if job.ref.uid not in self._services:
            await self.cluster.create_service(job.ref.namespace, desired.service)
            self._services.add(job.ref.uid)

    async def _create_pods(self, job: Job, pods: tuple[dict[str, Any], ...]) -> None:
        results = await asyncio.gather(
            *(self.cluster.create_pod(job.ref.namespace, pod) for pod in pods),
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
            body, invalid_job(previous, generation, reason, message, self._clock())
        )

    async def _write_status(self, body: dict[str, Any], update: StatusUpdate) -> bool:
        """Write the status if it changed; False if the job changed meanwhile (the watch
        brings the newer version, which is reconciled instead)."""
        previous = body.get("status") or {}
        if update.status == previous:
            return True
        meta = body["metadata"]
        # A merge patch keeps keys it does not mention: removed ones are sent as null.
        patch = {**{k: None for k in previous if k not in update.status}, **update.status}
        try:
            updated = await self.cluster.patch_job_status(
                meta["namespace"], meta["name"], patch, meta.get("resourceVersion")
            )
        except Conflict:
            self._wake((meta["namespace"], meta["name"]), CONFLICT_RETRY_SECONDS)
            return False
        body["status"] = update.status
        body["metadata"] = {**meta, "resourceVersion": updated["metadata"]["resourceVersion"]}
        key = (meta["namespace"], meta["name"])
        cached = self.jobs.get(key)
        if cached is not None and _older(cached, body):
            # The watch replaced the cached job meanwhile (with this pass's earlier write,
            # if it wrote twice): the next pass must start from this write.
            self.jobs[key] = body
        if update.events:
            # Events are informational: posting them must not hold up the next reconcile.
            self._spawn(self._post_events(dict(body), update.events))
        if update.entered is not None:
            before = Phase(previous["phase"]) if previous.get("phase") else None
            metrics.job_entered(body, before, update.entered)
        return True


def _owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    return any(ref["uid"] == uid for ref in pod["metadata"].get("ownerReferences", []))


def _older(body: Mapping[str, Any], known: Mapping[str, Any]) -> bool:
    """Whether `body` is an older version of the same object than `known`.

    resourceVersions are opaque strings, but etcd-backed API servers hand out increasing
    integers; where either is not one, nothing is assumed (the conditional status write
    then catches a stale view).
    """
    if body["metadata"].get("uid") != known["metadata"].get("uid"):
        return False
    try:
        return int(body["metadata"]["resourceVersion"]) < int(known["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return False
