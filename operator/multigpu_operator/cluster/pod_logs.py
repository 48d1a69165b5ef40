"""`mgj logs`: the pods' logs read from the API server (GET .../pods/NAME/log).

Through the operator's own HTTP client (cluster/rest.py), as `mgj render --server`
does; which pods and how their lines look is client/log_pods.py's. Following, each pod's log
is its own stream, read line by line as a watch is, and the job's pods are listed again
every few seconds so that a new attempt's pods are followed too, until the job is
Succeeded or Failed. A job followed before it has pods is waited for.
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
from multigpu_operator.cluster.api import Kube
from multigpu_operator.cluster.errors import ClusterError, NotFound
from multigpu_operator.cluster.kinds import JOBS, PODS
from multigpu_operator.cluster.rest import Login, Rest

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


def print_logs(
    login: Login, request: LogRequest, follow: bool, out: Output, on_job: OnJob | None = None
) -> None:
    """Every rank's log of the job (see client/log_pods.py); LogsError when there is none to
    show, ClusterError when the API server cannot be asked."""
    asyncio.run(_with_client(login, request, follow, out, on_job))


async def _with_client(
    login: Login, request: LogRequest, follow: bool, out: Output, on_job: OnJob | None
) -> None:
    rest = Rest(login, pool_size=8)
    try:
        if follow:
            await follow_logs(rest, request, out, on_job=on_job)
        else:
            await read_logs(rest, request, out)
    finally:
        await rest.close()


async def job_pods(rest: Rest, request: LogRequest) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The job and its pods; LogsError when the job does not exist."""
    kube = Kube(rest)
    try:
        job = await kube.get(JOBS, request.namespace, request.job)
    except NotFound as err:
        raise missing_job(request) from err
    pods, _ = await kube.list(PODS, request.namespace, job_selector(request.job))
    return job, pods


async def read_logs(rest: Rest, request: LogRequest, out: Output) -> None:
    """The logs as they are now, one pod after the other by replica index."""
    _, pods = await job_pods(rest, request)
    for pod in pods_of_attempt(request, pods):
        params = log_params(request, container_of(pod, request.container), follow=False)
        try:
            text = await rest.call("GET", _log_path(request, pod), params)
        except ClusterError as err:
            if err.status not in (NOT_STARTED, 404):
                raise
            _note(pod, err)
            continue
        out.writelines(prefixed(pod, text.decode(errors="replace")))
    out.flush()


async def follow_logs(
    rest: Rest,
    request: LogRequest,
    out: Output,
    poll_s: float = POLL_S,
    drain_s: float = DRAIN_S,
    on_job: OnJob | None = None,
) -> None:
    """The logs of every pod followed at once, lines as they come, until the job ends;
    `on_job` sees the job each time it is read."""
    job, pods = await job_pods(rest, request)
    # Followed right after it was created, a job has no pods yet: wait for them.
    while not pods and not finished(job):
        if on_job:
            on_job(job)
        await asyncio.sleep(poll_s)
        job, pods = await job_pods(rest, request)
    first_attempt = attempt_of(pods_of_attempt(request, pods)[0])
    streams: dict[str, asyncio.Task[None]] = {}
    try:
        while True:
            if on_job:
                on_job(job)
            for pod in followed(request, pods, first_attempt):
                if pod_key(pod) not in streams:
                    streams[pod_key(pod)] = asyncio.create_task(_follow(rest, request, pod, out))
            if finished(job):
                break
            await asyncio.sleep(poll_s)
            try:
                job, pods = await job_pods(rest, request)
            except LogsError:
                break  # the job was deleted: its pods go with it
        if streams:
            await asyncio.wait(streams.values(), timeout=drain_s)
    finally:
        for stream in streams.values():
            stream.cancel()
        await asyncio.gather(*streams.values(), return_exceptions=True)


async def _follow(rest: Rest, request: LogRequest, pod: Pod, out: Output) -> None:
    """One pod's log, line by line, until its container ends or the pod is gone."""
    params = log_params(request, container_of(pod, request.container), follow=True)
    start = prefix(pod)
    while True:
        try:
            # No total timeout: a rank may be quiet for a long time.
            async for line in rest.lines(_log_path(request, pod), params, timeout_s=None):
                out.write(start + line.decode(errors="replace").rstrip("\r\n") + "\n")
                out.flush()
            return
        except ClusterError as err:
            if err.status != NOT_STARTED:
                _note(pod, err)
                return
        await asyncio.sleep(RETRY_S)


def _log_path(request: LogRequest, pod: Pod) -> str:
    return PODS.path(request.namespace, pod_name(pod), "log")


def _note(pod: Pod, err: ClusterError) -> None:
    print(f"{prefix(pod)}no log: {err.message}", file=sys.stderr)
