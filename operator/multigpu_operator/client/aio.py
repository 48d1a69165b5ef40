"""AsyncClient: the jobs of one namespace, in async form, through the Cluster verbs
(cluster/protocol.py) the operator uses: on a Kube of the kubeconfig's login, or on the
Cluster given (the tests' in-memory API server)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

from multigpu_operator.api.names import job_selector
from multigpu_operator.api.spec import KIND
from multigpu_operator.api.status import TERMINAL, JobStatus, Phase
from multigpu_operator.client import pod_logs
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
    context_namespace,
    job_view,
    kubeconfig_login,
    manifest_of,
)
from multigpu_operator.cluster.api import Kube, open_kube
from multigpu_operator.cluster.errors import Forbidden, Invalid, NotFound
from multigpu_operator.cluster.kinds import EVENTS, JOBS, PODS
from multigpu_operator.cluster.login import Login
from multigpu_operator.cluster.protocol import Cluster

# How often `wait` reads the job again.
POLL_S = 2.0
# The name the API server records the client's writes under (managedFields).
FIELD_MANAGER = "mgj"


class AsyncClient:
    """MultiGPUJobs of one namespace (the argument, else the kubeconfig context's, else
    `default`). Use as `async with AsyncClient() as jobs:` or call close(). On `cluster`
    when given (it is not closed here), else on a connection of its own."""

    def __init__(
        self,
        namespace: str | None = None,
        kubeconfig: str | None = None,
        login: Login | None = None,
        cluster: Cluster | None = None,
    ) -> None:
        login = login or kubeconfig_login(kubeconfig)
        self._own: Kube | None = None
        if cluster is None:
            credentials = login()  # read once: the namespace and the connection
            self._own = cluster = open_kube(lambda: credentials, 8, FIELD_MANAGER)
            namespace = namespace or getattr(credentials, "default_namespace", None) or "default"
        self.namespace: str = namespace or context_namespace(login)
        self._kube: Cluster = cluster

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own is not None:
            await self._own.close()

    async def create(self, job: Manifest) -> str:
        """Create the job; its name. InvalidJob with the API server's words if refused."""
        manifest = manifest_of(job)
        meta = manifest.get("metadata") or {}
        try:
            stored = await self._kube.create(
                JOBS, meta.get("namespace") or self.namespace, manifest
            )
        except (Invalid, Forbidden, NotFound) as err:  # NotFound: no such namespace
            raise InvalidJob(err.message) from err
        if stored is None:  # the server's AlreadyExists
            raise InvalidJob(f'{JOBS.plural}.{JOBS.group} "{meta.get("name")}" already exists')
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
        request = LogRequest(name, self.namespace, attempt, replica=replica)
        lines = _Lines()
        read = pod_logs.follow_logs if follow else pod_logs.read_logs
        task = asyncio.ensure_future(read(self._kube, request, lines))
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
        """The job's Events as the operator posts them (events.k8s.io/v1: `reason`,
        `note`, `type`, `series`; whose `regarding` a field selector finds), oldest
        first."""
        fields = f"regarding.name={name},regarding.kind={KIND}"
        events, _ = await self._kube.list(EVENTS, self.namespace, fields=fields)
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
        await self._kube.delete(JOBS, self.namespace, name, propagation="Foreground")
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
    """When the Event was last seen (a series' last time, else its own)."""
    return str(
        (event.get("series") or {}).get("lastObservedTime")
        or event.get("eventTime")
        or event.get("deprecatedLastTimestamp")
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
