"""An in-memory API server behind cluster.protocol.Cluster, for controller unit tests.

Like controller-runtime's fake client, one store of plain dicts keyed by kind, with the
API server's behaviours for every kind alike: each write takes the next resourceVersion
from one counter (as etcd does) and new objects get a uid; a create of an existing name
answers None (AlreadyExists), a write to a missing object NotFound, a stale
resourceVersion precondition Conflict; a delete with a UID precondition leaves a
namesake alone, and deleting an owner collects what its ownerReferences name (garbage
collection); a delete of an object with finalizers marks it (deletionTimestamp) and
keeps it until a write takes its last finalizer away. Lists and watches select by
namespace, labels and fields; watches replay the changes after the version they are
given and end after their timeout. A pod's `log` is what `logs` holds for it, read whole
or streamed; a pod without one answers 400 as a container still waiting to start does.
Kueue's kinds are served only once a test says Kueue is installed.

The test plays the rest of the world: kopf (`on_job_event` gets every job change, as
the kopf handler does; None while its watch is down), the kubelet (`set_phase`, `logs`),
a user or another controller (`put`, `remove`, `set_workload_status`; `before` runs a
step of the test before each of the next calls of a verb, as the operator moving a job
along between a user's reads), and failures (`fail` makes the next calls of one verb on
one resource, or on one object of it, raise one of cluster/errors.py's errors, `heal`
cancels those still planned). Every call is recorded, with the loop time
it was made at, in `calls`, named "<verb> <resource>" as mgj_api_requests_total counts
it: "create pods", "dry-run pods", "patch multigpujobs/status", "list nodes", "get pods/log".

Two of the API server's checks are the project's own invariants here: a job's status
write is checked against the CRD's status schema with strict field validation (a
misspelt key is refused and kept in `refused_statuses`), and every write records the
module that made it, those of operator modules other than the actuator (and the
client, the user's side) in `outside_actuator`. support/controller_run.py fails a test
that leaves either.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from multigpu_operator.cluster.errors import ClusterError, Gone, Invalid, NotFound
from multigpu_operator.cluster.kinds import (
    EVENTS,
    JOBS,
    PODS,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    Kind,
)
from support.fake_api_rules import apply_merge_patch, as_watched, matches, precondition, tail
from support.fake_store import FakeStore, ObjectKey
from support.status_schema import status_problems

KUEUE = (WORKLOADS, RESOURCE_FLAVORS, WORKLOAD_PRIORITY_CLASSES)
# The one package of the operator that acts on the cluster; and the user's side, whose
# writes (`mgj submit`, `delete`) are the user's, not the operator's.
ACTING = ("multigpu_operator.actuator", "multigpu_operator.client")

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Call:
    method: str  # "<verb> <resource>"
    at: float  # loop time
    args: tuple[Any, ...]


@dataclass(frozen=True)
class PostedEvent:
    job: str
    type: str
    reason: str
    message: str


def write(
    verb: Callable[Concatenate[FakeCluster, Kind, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[FakeCluster, Kind, P], Coroutine[Any, Any, R]]:
    """A write: the module whose code calls it is recorded (at the call, before the
    coroutine runs in whatever task gathers it)."""

    @functools.wraps(verb)
    def called(
        fake: FakeCluster, kind: Kind, /, *args: P.args, **kwargs: P.kwargs
    ) -> Coroutine[Any, Any, R]:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith("multigpu_operator.") and not caller.startswith(ACTING):
            fake.outside_actuator.append(f"{caller}: {verb.__name__} {kind.plural}")
        return verb(fake, kind, *args, **kwargs)

    return called


class FakeCluster(FakeStore):
    def __init__(self, latency: float = 0.0) -> None:
        super().__init__()
        # Loop seconds every call takes: lets a test act while a reconcile is under way.
        self.latency = latency
        self.calls: list[Call] = []
        self.refused_statuses: list[str] = []  # status writes the schema refused
        self.outside_actuator: list[str] = []  # writes made by other operator modules
        self.kueue_installed = False
        # The kubelet's: the log lines of each pod's container (its current one).
        self.logs: dict[ObjectKey, list[str]] = {}
        # Planned failures: (error, the object's name or None for any).
        self._errors: dict[str, list[tuple[ClusterError, str | None]]] = defaultdict(list)
        self._before: dict[str, list[Callable[[], object]]] = defaultdict(list)

    @property
    def events(self) -> list[PostedEvent]:
        """The Events posted, oldest first."""
        return [
            PostedEvent(e["regarding"]["name"], e["type"], e["reason"], e["note"])
            for e in self.objects[EVENTS].values()
        ]

    # What the test does -----------------------------------------------------------

    def fail(
        self, method: str, error: ClusterError, times: int = 1, name: str | None = None
    ) -> None:
        """The next `times` calls of `method` ("create pods") raise `error`; with `name`,
        those on the object of that name."""
        self._errors[method].extend([(error, name)] * times)

    def before(self, method: str, *steps: Callable[[], object]) -> None:
        """The next calls of `method` ("get multigpujobs") each first run the next step."""
        self._before[method].extend(steps)

    def heal(self, method: str) -> None:
        """The failures still planned for `method` do not happen."""
        self._errors[method].clear()

    def calls_of(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    def status(self, name: str, namespace: str = "ns") -> dict[str, Any]:
        status: dict[str, Any] = self.jobs[namespace, name].get("status") or {}
        return status

    def condition(self, name: str, ctype: str, namespace: str = "ns") -> dict[str, Any]:
        conditions = self.status(name, namespace).get("conditions", [])
        return next((c for c in conditions if c["type"] == ctype), {})

    def pod_names(self, namespace: str = "ns") -> set[str]:
        return {name for ns, name in self.pods if ns == namespace}

    def workloads(self, namespace: str = "ns") -> list[dict[str, Any]]:
        return [obj for (ns, _), obj in self.objects[WORKLOADS].items() if ns == namespace]

    # cluster.protocol.Cluster -------------------------------------------------------

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]:
        await self._call("get", kind, namespace, name, name=name)
        return copy.deepcopy(self._existing(kind, namespace, name))

    async def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        selector: str | None = None,
        fields: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        await self._call("list", kind, namespace, selector, fields)
        items = [
            copy.deepcopy(obj)
            for obj in self.objects[kind].values()
            if matches(obj, selector, namespace, fields)
        ]
        return items, str(self._version)

    async def read(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        subresource: str,
        params: Mapping[str, str] | None = None,
    ) -> str:
        args = (namespace, name, dict(params or {}))
        await self._call("get", kind, *args, subresource=subresource, name=name)
        return "".join(f"{line}\n" for line in self._pod_log(kind, namespace, name, params))

    async def stream(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        subresource: str,
        params: Mapping[str, str] | None = None,
    ) -> AsyncIterator[str]:
        """The log as it is when asked, then the end: the container has ended."""
        args = (namespace, name, dict(params or {}))
        await self._call("get", kind, *args, subresource=subresource, name=name)
        for line in self._pod_log(kind, namespace, name, params):
            yield line

    async def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str | None = None,
        selector: str | None = None,
        timeout_seconds: int = 300,
        fields: str | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """The changes after `resource_version`, then new ones as they come, until the
        watch's timeout (or Gone once watches are expired)."""
        await self._call("watch", kind, resource_version, namespace, selector, fields)
        loop = asyncio.get_running_loop()
        ends = loop.time() + timeout_seconds
        seen = int(resource_version)
        epoch = self._watch_epoch
        while True:
            if epoch != self._watch_epoch:
                raise Gone(f"too old resource version: {seen}", 410)
            changed = self._changed
            for version, of, event, before in self._log:
                if version > seen and of == kind:
                    sent = as_watched(event, before, selector, namespace, fields)
                    if sent is not None:
                        yield copy.deepcopy(dict(sent))
                seen = max(seen, version)
            try:
                # Not asyncio.wait_for: on Python 3.11 it loses a cancellation that comes as
                # the event is set, and stopping the controller then waits out the timeout.
                async with asyncio.timeout(ends - loop.time()):
                    await changed.wait()
            except TimeoutError:
                return  # the server ends every watch after its timeout

    @write
    async def create(
        self,
        kind: Kind,
        namespace: str | None,
        body: Mapping[str, Any],
        dry_run: bool = False,
        read_back: bool = True,
    ) -> dict[str, Any] | None:
        name = body["metadata"]["name"]
        await self._call("dry-run" if dry_run else "create", kind, namespace, name, name=name)
        if dry_run:
            # Accepted unless a test made it fail; not stored.
            return copy.deepcopy(dict(body)) if read_back else {}
        if self._key(kind, namespace, name) in self.objects[kind]:
            return None
        created = copy.deepcopy(dict(body))
        if kind.namespaced:
            created["metadata"]["namespace"] = namespace
        if kind == PODS:
            created.setdefault("spec", {})
            created["status"] = {"phase": "Pending"}
        stored = self._store(kind, self._created(kind, created), "ADDED")
        return copy.deepcopy(stored) if read_back else {}

    @write
    async def replace(self, kind: Kind, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        await self._call("update", kind, meta.get("namespace"), meta["name"], name=meta["name"])
        current = self._existing(kind, meta.get("namespace"), meta["name"])
        precondition(kind, current, meta.get("resourceVersion"))
        replaced = copy.deepcopy(dict(body))
        replaced["metadata"]["uid"] = current["metadata"].get("uid")
        return copy.deepcopy(self._store(kind, replaced, "MODIFIED"))

    @write
    async def patch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        resource_version: str | None = None,
        subresource: str = "",
    ) -> dict[str, Any]:
        args = (namespace, name, copy.deepcopy(dict(patch)))
        await self._call("patch", kind, *args, subresource=subresource, name=name)
        current = self._existing(kind, namespace, name)
        precondition(kind, current, resource_version)
        # The status subresource writes only the status; the object itself all else.
        if subresource == "status":
            part = {"status": patch.get("status") or {}}
        else:
            part = {k: v for k, v in patch.items() if k != "status"}
        updated = apply_merge_patch(current, part)
        if kind == JOBS:
            problems = status_problems(updated.get("status") or {})
            if problems:
                self.refused_statuses += problems
                raise Invalid(f'MultiGPUJob.multigpu.dev "{name}" is invalid: {problems}', 422)
        stored = copy.deepcopy(self._store(kind, updated, "MODIFIED"))
        self._settle(kind, self._key(kind, namespace, name))
        return stored

    @write
    async def delete(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        uid: str | None = None,
        propagation: str | None = None,
    ) -> None:
        await self._call("delete", kind, namespace, name, uid, name=name)
        key = self._key(kind, namespace, name)
        obj = self.objects[kind].get(key)
        if obj is None or uid not in (None, obj["metadata"].get("uid")):
            return  # gone, or a namesake the precondition protects
        if not obj["metadata"].get("finalizers"):
            self._remove(kind, key)
        elif not obj["metadata"].get("deletionTimestamp"):
            obj["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z"
            self._store(kind, obj, "MODIFIED")

    # Inside ---------------------------------------------------------------------

    async def _call(
        self, verb: str, kind: Kind, *args: Any, subresource: str = "", name: str | None = None
    ) -> None:
        method = f"{verb} {kind.plural}" + (f"/{subresource}" if subresource else "")
        self.calls.append(Call(method, asyncio.get_running_loop().time(), args))
        if self._before[method]:
            self._before[method].pop(0)()
        if self.latency:
            await asyncio.sleep(self.latency)
        planned = self._errors[method]
        for index, (error, of) in enumerate(planned):
            if of in (None, name):
                del planned[index]
                raise type(error)(error.message, error.status)  # a fresh one each time
        if kind in KUEUE and not self.kueue_installed:
            raise NotFound("the server could not find the requested resource", 404)

    def _pod_log(
        self, kind: Kind, namespace: str | None, name: str, params: Mapping[str, str] | None
    ) -> Sequence[str]:
        """A pod's log as the kubelet serves it: of the container asked for, its last
        `tailLines`; a 400 while the container has not started (no log yet)."""
        pod = self._existing(kind, namespace, name)
        container = (params or {}).get("container")
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        if container is not None and container not in names:
            raise Invalid(f"container {container} is not valid for pod {name}", 400)
        lines = self.logs.get(self._key(kind, namespace, name))
        if lines is None:
            message = f'container "{container}" in pod "{name}" is waiting to start'
            raise Invalid(f"{message}: ContainerCreating", 400)
        return tail(lines, (params or {}).get("tailLines"))
