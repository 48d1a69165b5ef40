"""The reconcile loop: a de-duplicating work queue of jobs, drained by a few workers.

Each reconcile reads the latest job (from kopf's watch) and the job's pods (from the
label-selected pod informer), runs the pure pass (reconcile.py) and hands its Decision
to the actuator (actuator/), the one place that acts on the cluster: status first,
events after a successful status write. One key is never reconciled by two workers at
once.

The cluster is reached only through the cluster.protocol.Cluster it is given, and
fails only with cluster/errors.py's errors: tests run it against an in-memory fake.

Expected answers of the API server are not errors. A job gone (404) or whose namespace
is being deleted is forgotten; a conflict is looked at again; a child refused by
validation or admission is recorded here (`refusals`) and the next pass fails the job
naming the field (policy/steps/refusals.py); one refused by a full quota or a
ServiceAccount not there yet waits with backoff.
Only what is nobody's plan (an outage, the operator's own RBAC, a bug) is logged as an
error, counted in mgj_reconcile_errors_total and retried.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from multigpu_operator import metrics
from multigpu_operator.actuator import Actuator, Refused, WaitingFor
from multigpu_operator.api.status import JobStatus
from multigpu_operator.cluster.errors import (
    AccessDenied,
    ClusterError,
    NamespaceTerminating,
    NotFound,
)
from multigpu_operator.cluster.foreign_pods import ForeignPods
from multigpu_operator.cluster.informer import JobKey, PodInformer, ServiceInformer
from multigpu_operator.cluster.kueue_jobs import KueueJobs
from multigpu_operator.cluster.nodes import NodeInformer
from multigpu_operator.cluster.process_metrics import ProcessMetrics
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.cluster.runtimes import RuntimeInformer, RuntimeKey, names_runtime
from multigpu_operator.cluster.trim import trim_job
from multigpu_operator.controller.job_pass import JobPass
from multigpu_operator.controller.plan_cache import PlanCache
from multigpu_operator.controller.progress_board import ProgressBoard, Reader
from multigpu_operator.controller.workqueue import Backoff, WorkQueue
from multigpu_operator.objects import older, same_version
from multigpu_operator.policy.kube.timestamps import utc_now
from multigpu_operator.policy.steps.refusals import Refusal
from multigpu_operator.settings import Settings

log = logging.getLogger(__name__)

# What a user reads when the operator's own permissions are short.
_RBAC_HINT = " (Forbidden: the operator's RBAC lacks this permission; see its ClusterRole)"


class Controller:
    def __init__(
        self,
        cluster: Cluster,
        settings: Settings,
        clock: Callable[[], datetime] = utc_now,
        reader: Reader | None = None,
    ) -> None:
        self.cluster = cluster
        self.jobs: dict[JobKey, dict[str, Any]] = {}
        self.informer = PodInformer(cluster, self.enqueue, settings.namespace)
        self.services = ServiceInformer(cluster, self.enqueue, settings.namespace)
        # For telling "no node can ever fit" from "the cluster is busy" (policy/kube/fit.py).
        self.nodes = NodeInformer(cluster)
        # What other workloads' pods hold, for spec.placement: started by the first pass
        # that needs it (cluster/foreign_pods.py).
        self.foreign = ForeignPods(cluster, settings.namespace)
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
        # The runtimes jobs name (spec.runtimeRef): one that appears or changes wakes them.
        self.runtimes = RuntimeInformer(cluster, self._runtime_changed, settings.namespace)
        self.plans = PlanCache(runtimes=self.runtimes.get)
        # What the API server refused in each job's last pass: the next pass's input.
        self.refusals: dict[JobKey, Refusal] = {}
        self.actuator = Actuator(cluster, self.informer, self.services, self.kueue, self._wake)
        # What the jobs' processes report (read by the leader alone: it acts on it).
        self._reader = reader or ProcessMetrics()
        self.progress = ProgressBoard(
            self.informer,
            self.jobs,
            self.plans,
            self._reader,
            self.enqueue,
            clock,
            settings.progress_writes_per_second,
        )
        self.passes = JobPass(
            self.informer,
            self.services,
            self.nodes,
            self.kueue,
            self.plans,
            self.actuator,
            clock,
            self.progress,
            self.runtimes.listed,
            self.foreign,
        )

    async def start(self, reconcile: bool = True) -> None:
        """Start the caches, and the workers unless a leader election starts them."""
        self._tasks.append(asyncio.create_task(self.informer.run(), name="pod-informer"))
        self._tasks.append(asyncio.create_task(self.nodes.run(), name="node-informer"))
        self._tasks.append(asyncio.create_task(self.services.run(), name="service-informer"))
        for store in self.runtimes.stores:
            self._tasks.append(asyncio.create_task(store.run(), name=f"{store.reflector.kind}s"))
        if self.kueue.mode != "off":
            self._tasks.append(asyncio.create_task(self.kueue.informer.run(), name="workloads"))
        if reconcile:
            self.start_workers()

    def start_workers(self) -> None:
        self._reconcilers = [
            asyncio.create_task(self._worker(), name=f"reconcile-{i}") for i in range(self._workers)
        ]
        self._reconcilers.append(asyncio.create_task(self.progress.run(), name="progress"))

    async def stop_workers(self) -> None:
        """Stop reconciling (leadership lost), Events being posted too; caches keep running."""
        for task in self._reconcilers:
            task.cancel()
        await asyncio.gather(*self._reconcilers, return_exceptions=True)
        self._reconcilers = []
        await self.actuator.status.stop()
        await self._reader.close()

    async def stop(self) -> None:
        await self.stop_workers()
        await self.foreign.stop()
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

    def _runtime_changed(self, runtime: RuntimeKey) -> None:
        """Wake the jobs that name `runtime` and have not started with a copy of it."""
        for key, body in self.jobs.items():
            if names_runtime(body, runtime) and not _started(body):
                self.enqueue(key)

    def enqueue(self, key: JobKey) -> None:
        """Reconcile `key` soon (once more after the running pass, if one is running)."""
        self.queue.add(key)

    def _forget(self, key: JobKey, uid: str) -> None:
        """The job with `uid` is gone: no more passes, timers, metrics series or plans.
        (A new job of the same name, already cached, is left alone.)"""
        self.plans.forget(uid)
        self.actuator.templates.forget(uid)
        cached = self.jobs.get(key)
        if cached is not None and cached["metadata"].get("uid", "") == uid:
            del self.jobs[key]
            self.refusals.pop(key, None)
            self.progress.forget(key)
            metrics.job_forgotten(*key)
            self.actuator.forget(key, uid)
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
            except Refused as refused:
                # Looked at again at once: that pass writes what the refusal means.
                self.refusals[key] = refused.refusal
                self.queue.add(key)
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
            await self.actuator.release_deleted(key)
            return
        refusal = self.refusals.pop(key, None)
        if refusal is not None and refusal.uid != body["metadata"].get("uid"):
            refusal = None  # of a job of the same name, gone since
        try:
            await self.passes.run(key, body, refusal)
        except (NotFound, NamespaceTerminating) as err:
            # Expected ends, not errors: a 404 on the job's status write (it was deleted
            # during this pass, or while the watch was down and its DELETED event never
            # came) or on a create (its namespace is gone), or a create refused because
            # the namespace is being deleted (the job goes with it).
            log.info("%s/%s is gone or going (%s); forgetting it", *key, err.message)
            self._forget(key, body["metadata"].get("uid", ""))
        finally:
            self._keep_written(key, body)

    def _keep_written(self, key: JobKey, body: dict[str, Any]) -> None:
        """The pass's status write made `body` the job as written: if the watch replaced
        the cached job meanwhile with an older version, the next pass starts from this."""
        cached = self.jobs.get(key)
        if cached is not None and cached is not body and older(cached, body):
            self.jobs[key] = body

    def _wake(self, key: JobKey, delay: float) -> None:
        """Reconcile `key` again after `delay` seconds; one timer per job, the earliest."""
        # A little late rather than early: timestamps in the status have whole seconds.
        self.queue.add_after(key, delay + 0.5)


def _started(job: Mapping[str, Any]) -> bool:
    """Whether the job keeps a copy of its runtime (status.runtime): no runtime event
    changes what it runs."""
    try:
        return JobStatus.read(job.get("status") or {}).runtime is not None
    except ValueError:  # a status this version cannot read: its pass says why
        return False
