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
import json
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from multigpu_operator import metrics
from multigpu_operator.api.spec import OPERATOR_CONTROLLER, Job
from multigpu_operator.api.status import TERMINAL, Phase
from multigpu_operator.cluster.admission import refused_field
from multigpu_operator.cluster.errors import (
    AccessDenied,
    ClusterError,
    Conflict,
    Forbidden,
    Invalid,
    NamespaceTerminating,
    NotFound,
    QuotaExceeded,
)
from multigpu_operator.cluster.informer import JobKey, PodInformer, ServiceInformer
from multigpu_operator.cluster.kueue_jobs import KueueJobs
from multigpu_operator.cluster.nodes import NodeInformer
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.plan import DesiredState
from multigpu_operator.policy.conditions import Event
from multigpu_operator.policy.fail import invalid_job
from multigpu_operator.policy.status import COUNTS_WRITE_SECONDS, counts_only
from multigpu_operator.policy.step import StatusUpdate
from multigpu_operator.reconcile import decide, not_created, plan_object
from multigpu_operator.settings import Settings
from multigpu_operator.workqueue import Backoff, WorkQueue

log = logging.getLogger(__name__)
T = TypeVar("T")

# A job whose status write lost a race is looked at again this soon (the watch usually
# brings the newer version first).
CONFLICT_RETRY_SECONDS = 1.0
# Planning costs about a tenth of a millisecond per pod: jobs of more pods are planned and
# decided in a worker thread, so that the event loop keeps serving the watches, the
# other jobs, /metrics and /healthz.
INLINE_PODS = 100
# Pods are created this many at a time, and no more batches once one is refused: a job
# of thousands of pods whose template the server rejects costs one batch of requests.
CREATE_BATCH = 100
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
            Backoff(settings.retry_base_seconds, settings.retry_max_seconds)
        )
        self._clock = clock  # the time decisions and timestamps are made at
        self._workers = settings.workers
        self._tasks: list[asyncio.Task[None]] = []
        self._reconcilers: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._plans: dict[str, tuple[Any, tuple[Job, DesiredState] | str]] = {}  # by job UID
        self._counts_since: dict[JobKey, float] = {}  # loop time pod counts were first held

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
        """Stop reconciling (leadership lost); the caches keep running."""
        for task in self._reconcilers:
            task.cancel()
        await asyncio.gather(*self._reconcilers, return_exceptions=True)
        self._reconcilers = []

    async def stop(self) -> None:
        await self.stop_workers()
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
            self._forget(key, body["metadata"].get("uid", ""))
            return
        known = self.jobs.get(key)
        if known is not None and _older(body, known):
            return  # our own status write already gave us a newer version
        self.jobs[key] = dict(body)
        if known is not None and _same_version(body, known):
            return  # the echo of our own status write: nothing new to reconcile
        self.enqueue(key)

    def enqueue(self, key: JobKey) -> None:
        """Reconcile `key` soon (once more after the running pass, if one is running)."""
        self.queue.add(key)

    def _forget(self, key: JobKey, uid: str) -> None:
        """The job with `uid` is gone: no more passes, timers, metrics series or plans.
        (A new job of the same name, already cached, is left alone.)"""
        self._plans.pop(uid, None)
        cached = self.jobs.get(key)
        if cached is not None and cached["metadata"].get("uid", "") == uid:
            del self.jobs[key]
            self._counts_since.pop(key, None)
            self.queue.discard(key)

    # Workers ----------------------------------------------------------------

    async def _worker(self) -> None:
        await self.informer.synced.wait()
        await self.services.synced.wait()
        if self.kueue.mode != "off":
            await self.kueue.informer.synced()
        while True:
            key = await self.queue.get()
            start = time.perf_counter()
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
        planned = await self._plan(body)
        if isinstance(planned, str) and not _managed_here(body):
            return
        if isinstance(planned, str):
            await self._fail(body, "InvalidSpec", planned)
            return
        job, desired = planned
        if not job.spec.managed_here:
            # Another controller's job: no pods, no status; a job MultiKueue dispatches
            # still needs its Workload here (Kueue's job-framework part is ours).
            waiting = await self.kueue.dispatched(key, job, desired)
            if waiting:
                raise WaitingFor(waiting)
            return
        pods = [p for p in self.informer.pods_of(key) if _owned_by(p, job.ref.uid)]
        previous = body.get("status") or {}
        queued = self.kueue.standing(key, job) if self.kueue.queued(job) else (None, None)
        decision = await _offload(
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
        # Counters first: once the status says "attempt 3", a crash cannot make it 2 again.
        update = StatusUpdate(decision.status, decision.events, decision.entered)
        try:
            if not self._counts_held(key, previous, decision.status) and not (
                await self._write_status(body, update)
            ):
                return
        except Invalid as err:
            # Numbers the schema should have bounded (a world size past int32) make a
            # status the server refuses: say so once instead of retrying forever.
            await self._fail(body, "InvalidSpec", f"the job's status was refused: {err.message}")
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
            refused = await self._create_service(key, desired.service)
            if refused is not None:
                await self._refused(body, "Service", refused)
                return
        unseen = self.informer.unseen(key)
        refused = await self._create_pods(
            key, tuple(p for p in decision.create_pods if p["metadata"]["name"] not in unseen)
        )
        if refused is not None:
            await self._refused(body, "Pod", refused)
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

    async def _plan(self, body: Mapping[str, Any]) -> tuple[Job, DesiredState] | str:
        """The job and its desired children, or why it cannot be planned. Cached per
        spec (generation) and labels: a job sees many passes, its spec few changes."""
        meta = body["metadata"]
        key = (meta.get("generation"), json.dumps(meta.get("labels"), sort_keys=True))
        cached = self._plans.get(meta.get("uid", ""))
        if cached is not None and cached[0] == key:
            return cached[1]
        replicas = (body.get("spec") or {}).get("replicas")
        size = replicas if isinstance(replicas, int) else 1
        planned = await _offload(size, plan_object, body)
        self._plans[meta.get("uid", "")] = (key, planned)
        return planned

    def _counts_held(
        self, key: JobKey, previous: Mapping[str, Any], status: Mapping[str, Any]
    ) -> bool:
        """Whether to hold back a status write that only changes pod counts: written at
        most every COUNTS_WRITE_SECONDS (a timer writes the held counts then, unless a
        write of something else took them along first)."""
        if not counts_only(previous, status):
            return False
        now = asyncio.get_running_loop().time()
        since = self._counts_since.setdefault(key, now)
        if now - since >= COUNTS_WRITE_SECONDS:
            return False
        self._wake(key, since + COUNTS_WRITE_SECONDS - now)
        return True

    def _wake(self, key: JobKey, delay: float) -> None:
        """Reconcile `key` again after `delay` seconds; one timer per job, the earliest."""
        # A little late rather than early: timestamps in the status have whole seconds.
        self.queue.add_after(key, delay + 0.5)

    async def _create_service(
        self, key: JobKey, service: dict[str, Any]
    ) -> Invalid | Forbidden | None:
        """Create the job's Service; the refusal, if the server refused it."""
        try:
            await self.cluster.create_service(key[0], service)
        except (Invalid, Forbidden) as err:
            if not _refusal(err):
                raise
            return err
        self.services.created(key, service)
        return None

    async def _create_pods(
        self, key: JobKey, pods: tuple[dict[str, Any], ...]
    ) -> Invalid | Forbidden | None:
        """Create `pods` in batches; the first refusal, after which no batch is sent.
        Other errors (an outage, RBAC, the namespace going) are raised."""
        for start in range(0, len(pods), CREATE_BATCH):
            batch = pods[start : start + CREATE_BATCH]
            results = await asyncio.gather(
                *(self.cluster.create_pod(key[0], pod) for pod in batch), return_exceptions=True
            )
            for pod, result in zip(batch, results, strict=True):
                if not isinstance(result, BaseException):
                    self.informer.created(key, pod["metadata"]["name"])
            metrics.PODS_CREATED.inc(sum(r is True for r in results))
            errors = [r for r in results if isinstance(r, BaseException)]
            for error in errors:
                if not _refusal(error):
                    raise error
            if errors:
                return _refusal(errors[0])
        return None

    async def _refused(self, body: dict[str, Any], kind: str, err: Invalid | Forbidden) -> None:
        """The server refused a child of the job: wait while a quota is full, fail
        otherwise (no retry makes the server accept the same object)."""
        message = refusal_message(kind, err)
        generation = int(body["metadata"].get("generation", 1))
        previous = body.get("status") or {}
        now = self._clock()
        if isinstance(err, QuotaExceeded):
            await self._write_status(
                body, not_created(previous, generation, "QuotaExceeded", message, now)
            )
            raise WaitingFor(message)
        if kind == "Pod":
            reason = "InvalidPodTemplate" if isinstance(err, Invalid) else "PodForbidden"
            await self._fail(body, reason, message)
            return
        failed = invalid_job(previous, generation, "ServiceRefused", message, now)
        # The Created condition must not keep claiming a Service that does not exist.
        created = not_created(failed.status, generation, "ServiceRefused", message, now)
        await self._write_status(body, StatusUpdate(created.status, failed.events, failed.entered))

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
        self._counts_since.pop((meta["namespace"], meta["name"]), None)
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


class WaitingFor(Exception):
    """A pass that cannot finish for a reason that may pass (a full quota): its job is
    looked at again after the retry backoff, without counting an error."""


def refusal_message(kind: str, err: Invalid | Forbidden) -> str:
    """What the job's condition says about a refused child: the field to fix and the
    server's own message."""
    if kind == "Service":
        return f"the job's headless Service: {err.message}"
    if isinstance(err, Invalid):
        return err.message  # validation names the pod's own field
    return f"{refused_field(err.message)}: {err.message}"


async def _offload(pods: int, work: Callable[..., T], *args: Any) -> T:
    """`work(*args)`: in the loop for a small job, in a worker thread for a big one."""
    if pods <= INLINE_PODS:
        return work(*args)
    return await asyncio.to_thread(work, *args)


def _refusal(error: BaseException) -> Invalid | Forbidden | None:
    """`error` if it is the server refusing the object itself (the job's to fix, or a
    quota to wait for); None for what is not the job's doing."""
    if isinstance(error, NamespaceTerminating | AccessDenied):
        return None
    return error if isinstance(error, Invalid | Forbidden) else None


def _managed_here(body: Mapping[str, Any]) -> bool:
    return (body.get("spec") or {}).get("managedBy") in (None, OPERATOR_CONTROLLER)


def _owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    return any(ref["uid"] == uid for ref in pod["metadata"].get("ownerReferences", []))


def _same_version(body: Mapping[str, Any], known: Mapping[str, Any]) -> bool:
    """Whether `body` is the very version of the object `known` is (same UID and
    resourceVersion): a status write's own watch event."""
    meta, known_meta = body["metadata"], known["metadata"]
    version = meta.get("resourceVersion")
    return (
        version is not None
        and meta.get("uid") == known_meta.get("uid")
        and version == known_meta.get("resourceVersion")
    )


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
