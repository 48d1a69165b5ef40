"""Prometheus metrics of the operator, served on /metrics.

Counters and histograms are updated as things happen; gauges that describe the
current state (jobs by phase, the pod info series) are computed at scrape time from
the controller's caches by a Collector, so they can never drift from what the
operator actually sees.
"""

from __future__ import annotations

import logging
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from multigpu_operator.api.names import LABEL_JOB_NAME, LABEL_REPLICA_INDEX
from multigpu_operator.api.status import Phase
from multigpu_operator.policy.kube.timestamps import parse_time

log = logging.getLogger(__name__)

JOBS_CREATED = Counter(
    "mgj_jobs_created_total", "MultiGPUJobs the operator started", ["namespace", "mode"]
)
JOBS_SUCCEEDED = Counter(
    "mgj_jobs_succeeded_total", "MultiGPUJobs that succeeded", ["namespace", "mode"]
)
JOBS_FAILED = Counter("mgj_jobs_failed_total", "MultiGPUJobs that failed", ["namespace", "mode"])
PODS_CREATED = Counter("mgj_pods_created_total", "Pods created by the operator")
RECONCILE_DURATION = Histogram(
    "mgj_reconcile_duration_seconds",
    "Time of one reconcile pass of one job",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
API_REQUESTS = Counter(
    "mgj_api_requests_total", "Requests the operator sent to the API server", ["verb", "resource"]
)
# Where a job's wait goes, the operator's share told from the API server's: how long the
# server took to answer (client-go's rest_client_request_duration_seconds), how long a job
# waited for a worker (controller-runtime's workqueue_queue_duration_seconds).
API_REQUEST_DURATION = Histogram(
    "mgj_api_request_duration_seconds",
    "From sending a request to the API server to its answer, errors included (watches aside)",
    ["verb", "resource"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
QUEUE_WAIT = Histogram(
    "mgj_workqueue_queue_duration_seconds",
    "How long a job waited in the work queue before a worker took it",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
QUEUE_DEPTH = Gauge("mgj_workqueue_depth", "Jobs waiting in the work queue for a worker")
# controller-runtime's controller_runtime_active_workers: with an empty queue, 0 means idle.
ACTIVE_WORKERS = Gauge("mgj_active_workers", "Workers reconciling a job now")
# When the operator last looked at a job: a pass begun after a change has seen it. One
# series per job, gone with the job (like mgj_job_info).
JOB_LAST_RECONCILE = Gauge(
    "mgj_job_last_reconcile_timestamp_seconds",
    "When the last finished reconcile pass of a job began (Unix time)",
    ["namespace", "job"],
)
RECONCILE_ERRORS = Counter("mgj_reconcile_errors_total", "Reconcile passes that raised")
RESTARTS = Counter(
    "mgj_restarts_total",
    "Restarts decided by the operator: a new attempt, or an elastic pod replaced",
    ["namespace", "mode"],
)
JOB_DURATION = Histogram(
    "mgj_job_duration_seconds",
    "From a job's start (status.startTime) to Succeeded or Failed",
    ["namespace", "mode", "phase"],
    buckets=(10, 30, 60, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, 259200),
)
TIME_TO_RUNNING = Histogram(
    "mgj_job_time_to_running_seconds",
    "From a job's creation to all of its pods Running",
    ["namespace", "mode"],
    buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600),
)

LEADER = Gauge(
    "mgj_leader", "1 on the replica that holds the leader Lease and reconciles, 0 on a standby"
)


@contextmanager
def api_request(verb: str, resource: str) -> Iterator[None]:
    """Count one request to the API server and time it until its answer."""
    API_REQUESTS.labels(verb, resource).inc()
    start = time.perf_counter()
    try:
        yield
    finally:
        API_REQUEST_DURATION.labels(verb, resource).observe(time.perf_counter() - start)


def job_reconciled(namespace: str, name: str, began: float) -> None:
    JOB_LAST_RECONCILE.labels(namespace, name).set(began)


def job_forgotten(namespace: str, name: str) -> None:
    with suppress(KeyError):  # never reconciled
        JOB_LAST_RECONCILE.remove(namespace, name)


# Why this replica is not ready, or None when it is (a leader or a healthy standby).
Readiness = Callable[[], str | None]


def job_entered(body: Mapping[str, Any], previous: Phase | None, phase: Phase) -> None:
    """Count a job's phase transition."""
    labels = (body["metadata"]["namespace"], body.get("spec", {}).get("mode", ""))
    if previous is None:
        JOBS_CREATED.labels(*labels).inc()
    if phase is Phase.SUCCEEDED:
        JOBS_SUCCEEDED.labels(*labels).inc()
    elif phase is Phase.FAILED:
        JOBS_FAILED.labels(*labels).inc()
    if phase in (Phase.SUCCEEDED, Phase.FAILED):
        status = body.get("status") or {}
        start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
        if start and end:
            JOB_DURATION.labels(*labels, str(phase)).observe(
                max(0.0, (end - start).total_seconds())
            )
    elif phase is Phase.RUNNING and previous in (None, Phase.PENDING):
        created = parse_time(body["metadata"].get("creationTimestamp"))
        if created:
            TIME_TO_RUNNING.labels(*labels).observe(
                max(0.0, (datetime.now(UTC) - created).total_seconds())
            )


class StateCollector(Collector):
    """Jobs by phase and one info series per pod, from the controller's caches."""

    def __init__(
        self,
        jobs: Callable[[], Iterable[Mapping[str, Any]]],
        pods: Callable[[], Iterable[Mapping[str, Any]]],
    ) -> None:
        self._jobs = jobs
        self._pods = pods

    def collect(self) -> Iterable[Metric]:
        by_phase = Tally(
            (job.get("status") or {}).get("phase") or Phase.PENDING for job in self._jobs()
        )
        jobs = GaugeMetricFamily("mgj_jobs", "MultiGPUJobs by phase", labels=["phase"])
        for phase in Phase:
            jobs.add_metric([str(phase)], by_phase.get(phase, 0))
        yield jobs
        world = GaugeMetricFamily(
            "mgj_job_world_size",
            "Training processes of a running job (Elastic: follows scaling); 0 when not running",
            labels=["namespace", "job"],
        )
        job_info = GaugeMetricFamily(
            "mgj_job_info",
            "1 per MultiGPUJob, labelled with its mode and current phase",
            labels=["namespace", "job", "mode", "phase"],
        )
        restarts = GaugeMetricFamily(
            "mgj_job_restarts",
            "Restarts of a job so far (status.restarts)",
            labels=["namespace", "job"],
        )
        for job in self._jobs():
            status, meta = job.get("status") or {}, job["metadata"]
            labels = [meta["namespace"], meta["name"]]
            running = status.get("phase") == Phase.RUNNING
            world.add_metric(labels, int(status.get("worldSize") or 0) if running else 0)
            restarts.add_metric(labels, int(status.get("restarts") or 0))
            mode = (job.get("spec") or {}).get("mode", "")
            job_info.add_metric([*labels, mode, status.get("phase") or Phase.PENDING], 1)
        yield world
        yield restarts
        yield job_info
        info = GaugeMetricFamily(
            "mgj_job_pod_info",
            "1 for every pod of a MultiGPUJob; join GPU metrics (DCGM) on namespace and pod",
            # `replica`: the pod's replica index (label multigpu.dev/replica-index), not a
            # process rank: a pod with several GPUs runs one rank per GPU.
            labels=["namespace", "pod", "job", "replica"],
        )
        for pod in self._pods():
            meta = pod["metadata"]
            labels = meta.get("labels", {})
            info.add_metric(
                [
                    meta["namespace"],
                    meta["name"],
                    labels.get(LABEL_JOB_NAME, ""),
                    labels.get(LABEL_REPLICA_INDEX, ""),
                ],
                1,
            )
        yield info


def register_state(
    jobs: Callable[[], Iterable[Mapping[str, Any]]],
    pods: Callable[[], Iterable[Mapping[str, Any]]],
) -> StateCollector:
    collector = StateCollector(jobs, pods)
    REGISTRY.register(collector)
    return collector


async def serve(port: int, readiness: Readiness = lambda: None) -> web.AppRunner:
    """Serve /metrics on the event loop (no thread: the caches are read in-loop), with
    prometheus-client's own handler (content negotiation, compression, name[] filters),
    and /readyz: 200 on a leader or a healthy standby, 503 with the reason otherwise."""

    async def readyz(_: web.Request) -> web.Response:
        problem = readiness()
        return web.Response(status=503 if problem else 200, text=problem or "ok")

    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler(REGISTRY))
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    log.info("serving metrics on :%d/metrics", port)
    return runner
