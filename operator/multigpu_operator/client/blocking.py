"""Client: AsyncClient's calls each in an event loop of its own, as `mgj` makes them;
logs from an event loop run step by step. `run_with` is that one event loop for any
call on a Cluster (`mgj logs`, `mgj render --server`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from multigpu_operator.api.status import JobStatus, Phase
from multigpu_operator.client.aio import FIELD_MANAGER, AsyncClient
from multigpu_operator.client.views import Events, JobView, Manifest, kubeconfig_login
from multigpu_operator.cluster.api import open_kube
from multigpu_operator.cluster.login import Login
from multigpu_operator.cluster.protocol import Cluster

T = TypeVar("T")


def run_with(cluster: Cluster | None, login: Login, call: Callable[[Cluster], Awaitable[T]]) -> T:
    """`call` on `cluster`, else on a connection of `login` opened for it and closed
    after; in an event loop of its own."""

    async def on_cluster() -> T:
        if cluster is not None:
            return await call(cluster)
        kube = open_kube(login, 8, FIELD_MANAGER)
        try:
            return await call(kube)
        finally:
            await kube.close()

    return asyncio.run(on_cluster())


class Client:
    """The blocking form of AsyncClient: each call in an event loop of its own."""

    def __init__(
        self,
        namespace: str | None = None,
        kubeconfig: str | None = None,
        login: Login | None = None,
        cluster: Cluster | None = None,
    ) -> None:
        self._login = login or kubeconfig_login(kubeconfig)
        self._namespace = namespace
        self._cluster = cluster

    def _run(self, call: Callable[[AsyncClient], Awaitable[Any]]) -> Any:
        async def with_client() -> Any:
            async with _opened(self._namespace, self._login, self._cluster) as client:
                return await call(client)

        return asyncio.run(with_client())

    @property
    def namespace(self) -> str:
        return str(self._run(_namespace_of))

    def create(self, job: Manifest) -> str:
        return str(self._run(lambda c: c.create(job)))

    def get(self, name: str) -> JobView:
        view: JobView = self._run(lambda c: c.get(name))
        return view

    def list(self) -> list[JobView]:
        views: list[JobView] = self._run(lambda c: c.list())
        return views

    def wait(
        self,
        name: str,
        for_: Phase = Phase.SUCCEEDED,
        timeout: float | None = None,
        on_status: Callable[[JobStatus], None] | None = None,
        poll_s: float | None = None,
    ) -> JobStatus:
        status: JobStatus = self._run(lambda c: c.wait(name, for_, timeout, on_status, poll_s))
        return status

    def logs(
        self,
        name: str,
        follow: bool = False,
        attempt: int | None = None,
        replica: int | None = None,
    ) -> Iterator[str]:
        """The lines as they come, from an event loop run step by step."""
        loop = asyncio.new_event_loop()
        try:
            client = loop.run_until_complete(_made(self._namespace, self._login, self._cluster))
            lines = client.logs(name, follow, attempt, replica)
            try:
                while True:
                    try:
                        yield loop.run_until_complete(anext(lines))
                    except StopAsyncIteration:
                        return
            finally:
                loop.run_until_complete(lines.aclose())
                loop.run_until_complete(client.close())
        finally:
            loop.close()

    def events(self, name: str) -> Events:
        events: Events = self._run(lambda c: c.events(name))
        return events

    def delete(self, name: str, wait: bool = True, timeout: float = 120.0) -> None:
        self._run(lambda c: c.delete(name, wait, timeout))


def _opened(namespace: str | None, login: Login, cluster: Cluster | None) -> AsyncClient:
    return AsyncClient(namespace, login=login, cluster=cluster)


async def _made(namespace: str | None, login: Login, cluster: Cluster | None) -> AsyncClient:
    """An AsyncClient made in the running event loop (its connection belongs to it)."""
    return _opened(namespace, login, cluster)


async def _namespace_of(client: AsyncClient) -> str:
    return client.namespace
