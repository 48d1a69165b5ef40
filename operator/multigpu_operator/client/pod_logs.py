"""A job's pod logs read from the API server (get pods/log), for the client's `logs` and
`mgj logs`.

Through the Cluster verbs (cluster/protocol.py) the operator uses; which pods and how
their lines look is client/log_pods.py's. Following, each pod's log is its own stream,
read line by line, and the job's pods are listed again every few seconds so that a new
attempt's pods are followed too, until the job is Succeeded or Failed. A job followed
before it has pods is waited for.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Mapping
from typing import Any

from multigpu_operator.api.names import job_selector
from multigpu_operator.api.pod_labels import attempt_of
from multigpu_operator.client.log_pods import (
    LogRequest,
    LogsError,
    Output,
    Pod,
    container_of,
    finished,
    followed,
    log_params,
    missing_job,
    pod_key,
    pod_name,
    pods_of_attempt,
    prefix,
    prefixed,
)
from multigpu_operator.cluster.errors import ClusterError, NotFound
from multigpu_operator.cluster.kinds import JOBS, PODS
from multigpu_operator.cluster.protocol import Cluster

# How often the job's pods are listed again while following.
POLL_S = 2.0
# A pod whose container has not started yet is asked again after this.
RETRY_S = 1.0
# Once the job has ended, its pods' streams are given this long to reach their end.
DRAIN_S = 10.0
# Called with the job each time following reads it.
OnJob = Callable[[Mapping[str, Any]], None]
# The API server answers 400 to a log request for a container still waiting to start.
NOT_STARTED = 400


async def job_pods(
    cluster: Cluster, request: LogRequest
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The job and its pods; LogsError when the job does not exist."""
    try:
        job = await cluster.get(JOBS, request.namespace, request.job)
    except NotFound as err:
        raise missing_job(request) from err
    pods, _ = await cluster.list(PODS, request.namespace, job_selector(request.job))
    return job, pods


async def read_logs(cluster: Cluster, request: LogRequest, out: Output) -> None:
    """The logs as they are now, one pod after the other by replica index; LogsError
    when there is none to show."""
    _, pods = await job_pods(cluster, request)
    for pod in pods_of_attempt(request, pods):
        params = log_params(request, container_of(pod, request.container), follow=False)
        try:
            text = await cluster.read(PODS, request.namespace, pod_name(pod), "log", params)
        except ClusterError as err:
            if err.status not in (NOT_STARTED, 404):
                raise
            _note(pod, err)
            continue
        out.writelines(prefixed(pod, text))
    out.flush()


async def follow_logs(
    cluster: Cluster,
    request: LogRequest,
    out: Output,
    poll_s: float = POLL_S,
    drain_s: float = DRAIN_S,
    on_job: OnJob | None = None,
) -> None:
    """The logs of every pod followed at once, lines as they come, until the job ends;
    `on_job` sees the job each time it is read."""
    job, pods = await job_pods(cluster, request)
    # Followed right after it was created, a job has no pods yet: wait for them.
    while not pods and not finished(job):
        if on_job:
            on_job(job)
        await asyncio.sleep(poll_s)
        job, pods = await job_pods(cluster, request)
    first_attempt = attempt_of(pods_of_attempt(request, pods)[0])
    streams: dict[str, asyncio.Task[None]] = {}
    try:
        while True:
            if on_job:
                on_job(job)
            for pod in followed(request, pods, first_attempt):
                if pod_key(pod) not in streams:
                    follow = _follow(cluster, request, pod, out)
                    streams[pod_key(pod)] = asyncio.create_task(follow)
            if finished(job):
                break
            await asyncio.sleep(poll_s)
            try:
                job, pods = await job_pods(cluster, request)
            except LogsError:
                break  # the job was deleted: its pods go with it
        if streams:
            await asyncio.wait(streams.values(), timeout=drain_s)
    finally:
        for stream in streams.values():
            stream.cancel()
        await asyncio.gather(*streams.values(), return_exceptions=True)


async def _follow(cluster: Cluster, request: LogRequest, pod: Pod, out: Output) -> None:
    """One pod's log, line by line, until its container ends or the pod is gone."""
    params = log_params(request, container_of(pod, request.container), follow=True)
    start = prefix(pod)
    while True:
        try:
            async for line in cluster.stream(PODS, request.namespace, pod_name(pod), "log", params):
                out.write(f"{start}{line}\n")
                out.flush()
            return
        except ClusterError as err:
            if err.status != NOT_STARTED:
                _note(pod, err)
                return
        await asyncio.sleep(RETRY_S)


def _note(pod: Pod, err: ClusterError) -> None:
    print(f"{prefix(pod)}no log: {err.message}", file=sys.stderr)
