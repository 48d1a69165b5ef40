"""The reconcile loop: a de-duplicating work queue of jobs, drained by a few workers.

Each reconcile reads the latest job (from kopf's watch) and the job's pods (from the
label-selected pod informer), runs the pure planner and policies, performs the
resulting actions, and writes the status once at the end; events follow a
successful status write. One key is never reconciled by two workers at once.

The cluster is reached only through the cluster.protocol.Cluster it is given, and
fails only with cluster/errors.py's errors: tests run it against an in-memory fake.

Expected answers of the API server are not errors. A job gone (404) or whose namespace
is being deleted is forgotten; a conflict is looked at again; a child refused by
validation or admission fails the job naming the field, one refused by a full quota
waits with backoff. Only what is nobody's plan (an outage, the operator's own RBAC, a
bug) is logged as an error, counted in mgj_reconcile_errors_total and retried.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from multigpu_operator import metrics
from multigpu_operator.api.status import TERMINAL
from multigpu_operator.children import (
    TemplateChecks,
    WaitingFor,
    create_pods,
    create_service,
)
from multigpu_operator.cluster.errors import (
    AccessDenied,
    ClusterError,
    Invalid,
    NamespaceTerminating,
    NotFound,
)
from multigpu_operator.cluster.informer import JobKey, PodInformer, ServiceInformer
from multigpu_operator.cluster.kueue_jobs import KueueJobs
from multigpu_operator.cluster.nodes import NodeInformer
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.cluster.trim import trim_job
from multigpu_operator.objects import managed_here, older, owned_by, same_version
from multigpu_operator.plans import PlanCache, offload
from multigpu_operator.policy.status import first_write_waits
from multigpu_operator.policy.step import StatusUpdate
from multigpu_operator.reconcile import decide
from multigpu_operator.settings import Settings
from multigpu_operator.status_writer import StatusWriter
from multigpu_operator.workqueue import Backoff, WorkQueue

log = logging.getLogger(__name__)

# What a user reads when the operator's own permissions are short.
_RBAC_HINT = " (Forbidden: the operator's RBAC lacks this permission; see its ClusterRole)"


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
        self.services = ServiceInformer(cluster, self.enqueue, settings.namespace)
        # For telling "no node can ever fit" from "the cluster is busy" (policy/fit.py).
        self.nodes = NodeInformer(cluster)
        # Jobs queued in Kueue: their Workloads (cluster/kueue_jobs.py).
        self.kueue = KueueJobs(cluster, self.enqueue, settings.namespace, settings.kueue)
        self.queue: WorkQueue[JobKey] = WorkQueue(
            Backoff(settings.retry_base_seconds, settings.retry_max_seconds),
            metrics.QUEUE_WAIT.observe,
        )
        metrics.QUEUE_DEPTH.set_function(lambda: len(self.queue))
        metrics.ACTIVE_WORKERS.set_function(self.queue.active)
        self._clock = clock  # the time decisions and timestamps are made at
        self._workers = settings.workers
        self._tasks: list[asyncio.Task[None]] = []
        self._reconcilers: list[asyncio.Task[None]] = []
        self.plans = PlanCache()
        self.status = StatusWriter(cluster, self.jobs, self._wake, clock)
        self.templates = TemplateChecks(cluster)  # dry runs of templates (children.py)

    async def start(self, reconcile: bool = True) -> None:
        """Start the caches, and the workers unless a leader election starts them."""
        self._tasks.append(asyncio.create_task(self.informer.run(), name="pod-informer"))
        self._tasks.append(asyncio.create_task(self.nodes.run(), name="node-informer"))
        self._tasks.append(asyncio.create_task(self.services.run(), name="service-informer"))
        if self.kueue.mode != "off":
            self._tasks.append(asyncio.create_task(self.kueue.informer.run(), name="workloads"))
        if reconcile:
            self.start_workers()

    def start_workers(self) -> None:
        self._reconcilers = [
            asyncio.create_task(self._worker(), name=f"reconcile-{i}") for i in range(self._workers)
        ]

    async def stop_workers(self) -> None:
        """Stop reconciling (leadership lost), Events being posted too; caches keep running."""
        for task in self._reconcilers:
            task.cancel()
        await asyncio.gather(*self._reconcilers, return_exceptions=True)
        self._reconcilers = []
        await self.status.stop()

    async def stop(self) -> None:
        await self.stop_workers()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # Inputs -----------------------------------------------------------------

    def job_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Called by kopf for every watch event of a MultiGPUJob."""
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if event_type == "DELETED":
            self._forget(key, body["metadata"].get("uid", ""))
            return
        known = self.jobs.get(key)
        if known is not None and older(body, known):
            return  # our own status write already gave us a newer version
        self.jobs[key] = trim_job(body)
        if known is not None and same_version(body, known):
            return  # the echo of our own status write: nothing new to reconcile
        self.enqueue(key)

    def enqueue(self, key: JobKey) -> None:
        """Reconcile `key` soon (once more after the running pass, if one is running)."""
        self.queue.add(key)

    def _forget(self, key: JobKey, uid: str) -> None:
        """The job with `uid` is gone: no more passes, timers, metrics series or plans.
        (A new job of the same name, already cached, is left alone.)"""
        self.plans.forget(uid)
        self.templates.forget(uid)
        cached = self.jobs.get(key)
        if cached is not None and cached["metadata"].get("uid", "") == uid:
            del self.jobs[key]
            metrics.job_forgotten(*key)
            self.status.forget(key)
            self.queue.discard(key)

    # Workers ----------------------------------------------------------------

    async def _worker(self) -> None:
        await self.informer.synced.wait()
        await self.services.synced.wait()
        if self.kueue.mode != "off":
            await self.kueue.informer.synced()
        while True:
            key = await self.queue.get()
            start, began = time.perf_counter(), self._clock().timestamp()
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                self.queue.add(key)  # cut short: whoever reconciles next does it again
                raise
            except WaitingFor as waiting:
                delay = self.queue.retry(key)
                log.info("%s/%s waits: %s; looking again in %.0fs", *key, waiting, delay)
            except ClusterError as err:
                # The API server's answer says it all; a traceback would only add aiohttp.
                delay = self.queue.retry(key)
                log.error(
                    "reconcile of %s/%s failed: HTTP %s: %s%s; retrying in %.0fs",
                    *key,
                    err.status,
                    err.message,
                    _RBAC_HINT if isinstance(err, AccessDenied) else "",
                    delay,
                )
                metrics.RECONCILE_ERRORS.inc()
            except Exception:
                delay = self.queue.retry(key)
                log.exception("reconcile of %s/%s failed; retrying in %.0fs", *key, delay)
                metrics.RECONCILE_ERRORS.inc()
            else:
                self.queue.forget(key)
            finally:
                metrics.RECONCILE_DURATION.observe(time.perf_counter() - start)
                if key in self.jobs:  # not a job forgotten meanwhile
                    metrics.job_reconciled(*key, began)
                self.queue.done(key)

    async def reconcile(self, key: JobKey) -> None:
        body = self.jobs.get(key)
        if body is None or body["metadata"].get("deletionTimestamp"):
            # Deleted, or being deleted: garbage collection removes the children, the
            # Workload once it is released.
            await self.kueue.release_deleted(key)
            return
        try:
            await self._reconcile(key, body)
        except (NotFound, NamespaceTerminating) as err:
            # Expected ends, not errors: a 404 on the job's status write (it was deleted
            # during this pass, or while the watch was down and its DELETED event never
            # came) or on a create (its namespace is gone), or a create refused because
            # the namespace is being deleted (the job goes with it).
            log.info("%s/%s is gone or going (%s); forgetting it", *key, err.message)
            self._forget(key, body["metadata"].get("uid", ""))

    async def _reconcile(self, key: JobKey, body: dict[str, Any]) -> None:
        planned = await self.plans.plan(body)
        if isinstance(planned, str) and not managed_here(body):
            return
        if isinstance(planned, str):
            await self.status.fail(body, "InvalidSpec", planned)
            return
        job, desired = planned
        if not job.spec.managed_here:
            # Another controller's job: no pods, no status; a job MultiKueue dispatches
            # still needs its Workload here (Kueue's job-framework part is ours).
            waiting = await self.kueue.dispatched(key, job, desired)
            if waiting:
                raise WaitingFor(waiting)
            return
        pods = [p for p in self.informer.pods_of(key) if owned_by(p, job.ref.uid)]
        previous = body.get("status") or {}
        queued = self.kueue.standing(key, job) if self.kueue.queued(job) else (None, None)
        decision = await offload(
            len(desired.pods),
            decide,
            job,
            desired,
            pods,
            previous,
            self._clock(),
            self.nodes.nodes(),
            *queued,
        )
        # A template no pod is created from yet is checked now (once per generation): a
        # refusal fails the job from this pass's status, as a refused create does.
        refused = await self.templates.check(job, desired, pods, decision)
        if refused is not None:
            await self.status.refused(body, "Pod", refused, decision.status)
            return
        # Counters first: once the status says "attempt 3", a crash cannot make it 2 again.
        # (A new job's attempt 1 needs no write first: policy/status.py first_write_waits.)
        update = StatusUpdate(decision.status, decision.events, decision.entered)
        waits = first_write_waits(previous, decision)
        base = decision.status if waits else None  # what a refusal's status starts from
        try:
            if (
                not waits
                and not self.status.counts_held(key, previous, decision.status)
                and not (await self.status.write(body, update))
            ):
                return
        except Invalid as err:
            # Numbers the schema should have bounded (a world size past int32) make a
            # status the server refuses: say so once instead of retrying forever.
            await self.status.fail(
                body, "InvalidSpec", f"the job's status was refused: {err.message}"
            )
            self._wake(key, 0)  # pods created before that write go by the clean-pod policy
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
        # The Service before the pods (their DNS names), on every pass like the pods: one
        # deleted by hand, or never created (a crash between the two), is created again.
        if decision.status.get("phase") not in TERMINAL and not self.services.has_service(
            key, job.ref.uid
        ):
            refused = await create_service(self.cluster, self.services, key, desired.service)
            if refused is not None:
                await self.status.refused(body, "Service", refused, base)
                return
        unseen = self.informer.unseen(key)
        refused = await create_pods(
            self.cluster,
            self.informer,
            key,
            tuple(p for p in decision.create_pods if p["metadata"]["name"] not in unseen),
        )
        if refused is not None:
            await self.status.refused(body, "Pod", refused, base)
            return
        if decision.workload is not None:
            waiting = await self.kueue.write(job, desired, decision.workload, queued[1])
            if waiting:
                raise WaitingFor(waiting)
        if decision.delete_job:
            log.info("deleting %s/%s: ttlSecondsAfterFinished passed", *key)
            await self.cluster.delete_job(job.ref.namespace, job.ref.name, job.ref.uid)
        if decision.requeue_after is not None:
            self._wake(key, decision.requeue_after)

    def _wake(self, key: JobKey, delay: float) -> None:
        """Reconcile `key` again after `delay` seconds; one timer per job, the earliest."""
        # A little late rather than early: timestamps in the status have whole seconds.
        self.queue.add_after(key, delay + 0.5)
