"""AsyncClient: the jobs of one namespace, in async form."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

from multigpu_operator.api.names import job_selector
from multigpu_operator.api.spec import KIND
from multigpu_operator.api.status import TERMINAL, JobStatus, Phase
from multigpu_operator.client.log_pods import LogRequest, LogsError
from multigpu_operator.client.views import (
    ClientError,
    Events,
    InvalidJob,
    JobEnded,
    JobNotFound,
    JobView,
    Manifest,
    WaitTimeout,
    job_view,
    kubeconfig_login,
    manifest_of,
)
from multigpu_operator.cluster.api import Kube
from multigpu_operator.cluster.errors import ClusterError, Invalid, NotFound
from multigpu_operator.cluster.kinds import JOBS, PODS
from multigpu_operator.cluster.rest import Login, Rest

# How often `wait` reads the job again.
POLL_S = 2.0


class AsyncClient:
    """MultiGPUJobs of one namespace (the argument, else the kubeconfig context's, else
    `default`). Use as `async with AsyncClient() as jobs:` or call close()."""

    def __init__(
        self,
        namespace: str | None = None,
        kubeconfig: str | None = None,
        login: Login | None = None,
    ) -> None:
        self._login = login or kubeconfig_login(kubeconfig)
        credentials = self._login()
        self._rest = Rest(lambda: credentials, pool_size=8)
        default = getattr(credentials, "default_namespace", None)
        self.namespace: str = namespace or default or "default"
        self._kube = Kube(self._rest)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._rest.close()

    async def create(self, job: Manifest) -> str:
        """Create the job; its name. InvalidJob with the API server's words if refused."""
        manifest = manifest_of(job)
        namespace = (manifest.get("metadata") or {}).get("namespace") or self.namespace
        try:
            stored = await self._rest.json(
                "POST", JOBS.path(namespace), {"fieldValidation": "Strict"}, manifest
            )
        except (Invalid, ClusterError) as err:
            if isinstance(err, Invalid) or err.status in (403, 404, 409):
                raise InvalidJob(err.message) from err
            raise
        return str(stored["metadata"]["name"])

    async def get(self, name: str) -> JobView:
        job = await self._job(name)
        pods, _ = await self._kube.list(PODS, self.namespace, job_selector(name))
        return job_view(job, pods)

    async def list(self) -> list[JobView]:
        jobs, _ = await self._kube.list(JOBS, self.namespace)
        return [job_view(job, []) for job in jobs]

    async def wait(
        self,
        name: str,
        for_: Phase = Phase.SUCCEEDED,
        timeout: float | None = None,  # noqa: ASYNC109 (a deadline between polls)
        on_status: Callable[[JobStatus], None] | None = None,
        poll_s: float | None = None,
    ) -> JobStatus:
        """The job's status once it is in phase `for_`; JobEnded if it ends otherwise,
        WaitTimeout after `timeout` seconds. `on_status` sees each status read."""
        poll_s = POLL_S if poll_s is None else poll_s
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = JobStatus.model_validate((await self._job(name)).get("status") or {})
            if on_status:
                on_status(status)
            if status.phase == for_:
                return status
            if status.phase in TERMINAL:
                why = f": {status.reason}" if status.reason else ""
                raise JobEnded(f"job {name!r} is {status.phase}{why}", status)
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"job {name!r} is still {status.phase or 'new'} after {timeout:g} s", status
                )
            left = poll_s if deadline is None else min(poll_s, deadline - time.monotonic())
            await asyncio.sleep(max(left, 0))

    async def logs(
        self,
        name: str,
        follow: bool = False,
        attempt: int | None = None,
        replica: int | None = None,
    ) -> AsyncGenerator[str]:
        """Every rank's log lines (without newlines), prefixed `[pod rN] `."""
        from multigpu_operator.cluster import pod_logs

        request = LogRequest(name, self.namespace, attempt, replica=replica)
        lines = _Lines()
        read = pod_logs.follow_logs if follow else pod_logs.read_logs
        task = asyncio.ensure_future(read(self._rest, request, lines))
        try:
            while True:
                getter = asyncio.ensure_future(lines.queue.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result().rstrip("\n")
                    continue
                getter.cancel()
                while not lines.queue.empty():
                    yield lines.queue.get_nowait().rstrip("\n")
                try:
                    task.result()
                except LogsError as err:
                    raise ClientError(str(err)) from err
                return
        finally:
            task.cancel()

    async def events(self, name: str) -> Events:
        """The job's Events (core v1, whose involvedObject a field selector finds), oldest
        first."""
        selector = f"involvedObject.name={name},involvedObject.kind={KIND}"
        path = f"/api/v1/namespaces/{self.namespace}/events"
        answer = await self._rest.json("GET", path, {"fieldSelector": selector})
        events: Events = answer.get("items") or []
        return sorted(events, key=_event_time)

    async def delete(
        self,
        name: str,
        wait: bool = True,
        timeout: float = 120.0,  # noqa: ASYNC109 (a deadline between polls)
    ) -> None:
        """Delete the job and its pods; with `wait` (as `kubectl delete`), return once the
        job is gone, so a job of the same name can be created at once."""
        await self._job(name)  # JobNotFound when there is none
        # Its pods go first (Foreground), so a job of the same name starts from none.
        body = {"propagationPolicy": "Foreground"}
        await self._rest.call("DELETE", JOBS.path(self.namespace, name), body=body)
        deadline = time.monotonic() + timeout
        while wait:
            try:
                await self._kube.get(JOBS, self.namespace, name)
            except NotFound:
                return
            if time.monotonic() >= deadline:
                raise ClientError(f"job {name!r} is still being deleted after {timeout:g} s")
            await asyncio.sleep(0.5)

    async def _job(self, name: str) -> dict[str, Any]:
        try:
            return await self._kube.get(JOBS, self.namespace, name)
        except NotFound as err:
            raise JobNotFound(f"no {KIND} {name!r} in namespace {self.namespace!r}") from err


def _event_time(event: Mapping[str, Any]) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


class _Lines:
    """A text stream whose lines go into a queue (pod_logs writes whole lines)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str] = asyncio.Queue()

    def write(self, text: str) -> int:
        self.queue.put_nowait(text)
        return len(text)

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass
