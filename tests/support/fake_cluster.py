"""An in-memory API server behind cluster.protocol.Cluster, for controller unit tests.

Objects are plain dicts, as the API server returns them: every write takes the next
resourceVersion from one counter (as etcd does), pods are created Pending with a uid,
a job's status is merge-patched with optimistic concurrency (a stale resourceVersion
raises Conflict), deleting a job collects its children. The pod, Service and node
watches replay the changes after the version they are given and end after their
timeout, like the server's.

The test plays the rest of the world: kopf (`on_job_event` gets every job change, as
the kopf handler does; None while its watch is down), the kubelet (`set_phase`), a user
(`delete_service`), Kueue (`kueue_installed`, `add_kueue`, `set_workload_status`),
and failures (`fail` makes the next calls of one method raise one of
cluster/errors.py's errors, `heal` cancels those still planned). Every call is recorded,
with the loop time it was made at, in `calls`.

Two of the API server's checks are the project's own invariants here: a status write is
checked against the CRD's status schema with strict field validation (a misspelt key is
refused and kept in `refused_statuses`), and every write (an action) records the module
that made it, those of operator modules other than the actuator in
`outside_actuator`. support/controller_run.py fails a test that leaves either.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import itertools
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from multigpu_operator.api import kueue
from multigpu_operator.api.spec import API_VERSION, KIND
from multigpu_operator.cluster.errors import ClusterError, Conflict, Gone, Invalid, NotFound
from support.status_schema import status_problems

ObjectKey = tuple[str, str]  # (namespace, name)
JobEventHandler = Callable[[str, Mapping[str, Any]], None]


# The one package of the operator that acts on the cluster.
ACTUATOR = "multigpu_operator.actuator"

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Call:
    method: str
    at: float  # loop time
    args: tuple[Any, ...]


def action(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """A write: the module whose code calls it is recorded (at the call, before the
    coroutine runs in whatever task gathers it)."""

    @functools.wraps(method)
    def called(*args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        fake = args[0]
        assert isinstance(fake, FakeCluster)
        if caller.startswith("multigpu_operator.") and not caller.startswith(ACTUATOR):
            fake.outside_actuator.append(f"{caller}: {method.__name__}")
        return method(*args, **kwargs)

    return called


@dataclass(frozen=True)
class PostedEvent:
    job: str
    type: str
    reason: str
    message: str


class FakeCluster:
    def __init__(self, latency: float = 0.0) -> None:
        # Loop seconds every call takes: lets a test act while a reconcile is under way.
        self.latency = latency
        self.jobs: dict[ObjectKey, dict[str, Any]] = {}
        self.pods: dict[ObjectKey, dict[str, Any]] = {}
        self.services: dict[ObjectKey, dict[str, Any]] = {}
        self.events: list[PostedEvent] = []
        self.calls: list[Call] = []
        self.on_job_event: JobEventHandler | None = None
        self.refused_statuses: list[str] = []  # status writes the schema refused
        self.outside_actuator: list[str] = []  # writes made by other operator modules
        self._errors: dict[str, list[ClusterError]] = defaultdict(list)
        self._version = 0  # the last resourceVersion handed out
        self._uids = itertools.count(1)
        self.nodes: dict[str, dict[str, Any]] = {}
        self._pod_log: list[tuple[int, dict[str, Any]]] = []  # (resourceVersion, watch event)
        self._service_log: list[tuple[int, dict[str, Any]]] = []
        self._node_log: list[tuple[int, dict[str, Any]]] = []
        # Kueue's objects by (plural, namespace or "", name); its API is served only
        # once a test says Kueue is installed.
        self.kueue_installed = False
        self.kueue: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._kueue_log: list[tuple[int, dict[str, Any]]] = []
        self._changed = asyncio.Event()
        self._watch_epoch = 0  # watches started before the current epoch end with Gone

    # What the test does -----------------------------------------------------------

    def fail(self, method: str, error: ClusterError, times: int = 1) -> None:
        """The next `times` calls of `method` raise `error`."""
        self._errors[method].extend([error] * times)

    def heal(self, method: str) -> None:
        """The failures still planned for `method` do not happen."""
        self._errors[method].clear()

    def calls_of(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    def add_job(
        self,
        name: str,
        spec: Mapping[str, Any],
        namespace: str = "ns",
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """Create a MultiGPUJob (kubectl apply); kopf's watch tells the controller."""
        job: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"job-uid-{next(self._uids)}",
                "generation": 1,
                "resourceVersion": self._next_version(),
                "creationTimestamp": "2026-11-22T10:00:00Z",
            },
            "spec": copy.deepcopy(dict(spec)),
        }
        if labels:
            job["metadata"]["labels"] = dict(labels)
        self.jobs[namespace, name] = job
        self._job_changed("ADDED", job)

    def status(self, name: str, namespace: str = "ns") -> dict[str, Any]:
        status: dict[str, Any] = self.jobs[namespace, name].get("status") or {}
        return status

    def condition(self, name: str, ctype: str, namespace: str = "ns") -> dict[str, Any]:
        conditions = self.status(name, namespace).get("conditions", [])
        return next((c for c in conditions if c["type"] == ctype), {})

    def pod_names(self, namespace: str = "ns") -> set[str]:
        return {name for ns, name in self.pods if ns == namespace}

    def set_phase(
        self, name: str, phase: str, exit_code: int | None = None, namespace: str = "ns"
    ) -> None:
        """Play the scheduler and the kubelet: the pod is bound and in `phase`."""
        pod = self.pods[namespace, name]
        pod["spec"]["nodeName"] = "gpu-node-0"
        pod["status"] = {"phase": phase}
        if exit_code is not None:
            term = {"exitCode": exit_code, "reason": "Error", "finishedAt": "2026-11-22T10:00:00Z"}
            pod["status"]["containerStatuses"] = [
                {"name": "trainer", "state": {"terminated": term}}
            ]
        pod["metadata"]["resourceVersion"] = self._next_version()
        self._pod_changed("MODIFIED", pod)

    def delete_service(self, name: str, namespace: str = "ns") -> None:
        """A user deletes a job's Service (kubectl delete service)."""
        service = self.services.pop((namespace, name))
        service["metadata"]["resourceVersion"] = self._next_version()
        self._service_changed("DELETED", service)

    def add_node(self, node: Mapping[str, Any]) -> None:
        """A node joins the cluster (or changes)."""
        stored = copy.deepcopy(dict(node))
        stored["metadata"]["resourceVersion"] = self._next_version()
        existed = stored["metadata"]["name"] in self.nodes
        self.nodes[stored["metadata"]["name"]] = stored
        self._node_changed("MODIFIED" if existed else "ADDED", stored)

    def remove_node(self, name: str) -> None:
        node = self.nodes.pop(name)
        node["metadata"]["resourceVersion"] = self._next_version()
        self._node_changed("DELETED", node)

    def set_unschedulable(self, name: str, message: str, namespace: str = "ns") -> None:
        """Play the scheduler: no node has room for the pod."""
        pod = self.pods[namespace, name]
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
        }
        pod["status"] = {"phase": "Pending", "conditions": [condition]}
        pod["metadata"]["resourceVersion"] = self._next_version()
        self._pod_changed("MODIFIED", pod)

    def add_kueue(self, plural: str, obj: Mapping[str, Any]) -> None:
        """A Kueue object made by someone else (a ResourceFlavor, a priority class)."""
        created = copy.deepcopy(dict(obj))
        created["metadata"]["resourceVersion"] = self._next_version()
        self._kueue_changed(plural, "ADDED", created)

    def workloads(self, namespace: str = "ns") -> list[dict[str, Any]]:
        return [
            obj
            for (plural, ns, _), obj in self.kueue.items()
            if plural == kueue.WORKLOADS and ns == namespace
        ]

    def set_workload_status(
        self, name: str, status: Mapping[str, Any], namespace: str = "ns"
    ) -> None:
        """Kueue writes a Workload's status (admits, evicts it)."""
        workload = copy.deepcopy(self.kueue[kueue.WORKLOADS, namespace, name])
        workload["status"] = copy.deepcopy(dict(status))
        workload["metadata"]["resourceVersion"] = self._next_version()
        self._kueue_changed(kueue.WORKLOADS, "MODIFIED", workload)

    def expire_watches(self) -> None:
        """The pod watches open now end with 410 Gone, as when etcd has compacted away
        the version they watch from."""
        self._watch_epoch += 1
        self._wake_watches()

    # cluster.protocol.Cluster -------------------------------------------------------

    @action
    async def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> bool:
        name = pod["metadata"]["name"]
        await self._call("create_pod", namespace, name)
        if (namespace, name) in self.pods:
            return False
        created = copy.deepcopy(dict(pod))
        created["metadata"].update(
            namespace=namespace,
            uid=f"pod-uid-{next(self._uids)}",
            resourceVersion=self._next_version(),
        )
        created.setdefault("spec", {})
        created["status"] = {"phase": "Pending"}
        self.pods[namespace, name] = created
        self._pod_changed("ADDED", created)
        return True

    @action
    async def dry_run_pod(self, namespace: str, pod: Mapping[str, Any]) -> None:
        # Accepted, unless a test made it fail (`fail("dry_run_pod", ...)`); nothing stored.
        await self._call("dry_run_pod", namespace, pod["metadata"]["name"])

    @action
    async def create_service(self, namespace: str, service: Mapping[str, Any]) -> bool:
        name = service["metadata"]["name"]
        await self._call("create_service", namespace, name)
        if (namespace, name) in self.services:
            return False
        created = copy.deepcopy(dict(service))
        created["metadata"].update(
            namespace=namespace,
            uid=f"service-uid-{next(self._uids)}",
            resourceVersion=self._next_version(),
        )
        self.services[namespace, name] = created
        self._service_changed("ADDED", created)
        return True

    @action
    async def delete_pod(self, namespace: str, name: str, uid: str | None = None) -> None:
        await self._call("delete_pod", namespace, name, uid)
        pod = self.pods.get((namespace, name))
        if pod is None or (uid is not None and pod["metadata"]["uid"] != uid):
            return  # gone, or a namesake: the UID precondition protects it
        self._remove_pod(namespace, name)

    @action
    async def patch_job_status(
        self, namespace: str, name: str, patch: Mapping[str, Any], resource_version: str | None
    ) -> dict[str, Any]:
        await self._call("patch_job_status", namespace, name, copy.deepcopy(dict(patch)))
        job = self.jobs.get((namespace, name))
        if job is None:
            raise NotFound(f'multigpujobs "{name}" not found', 404)
        if resource_version is not None and resource_version != job["metadata"]["resourceVersion"]:
            raise Conflict(
                f'Operation cannot be fulfilled on multigpujobs "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                409,
            )
        status = _merge(job.get("status") or {}, patch)
        problems = status_problems(status)
        if problems:
            self.refused_statuses += problems
            raise Invalid(f'MultiGPUJob.multigpu.dev "{name}" is invalid: {problems}', 422)
        job["status"] = status
        job["metadata"]["resourceVersion"] = self._next_version()
        self._job_changed("MODIFIED", job)
        return copy.deepcopy(job)

    @action
    async def delete_job(self, namespace: str, name: str, uid: str) -> None:
        await self._call("delete_job", namespace, name, uid)
        job = self.jobs.get((namespace, name))
        if job is None or job["metadata"]["uid"] != uid:
            return
        del self.jobs[namespace, name]
        self._job_changed("DELETED", job)
        # Garbage collection of the children (ownerReferences).
        for (ns, pod_name), pod in list(self.pods.items()):
            if _owned(pod, uid):
                self._remove_pod(ns, pod_name)
        for (ns, service_name), service in list(self.services.items()):
            if _owned(service, uid):
                self.delete_service(service_name, ns)

    @action
    async def post_event(
        self, job: Mapping[str, Any], type_: str, reason: str, message: str
    ) -> None:
        await self._call("post_event", reason)
        self.events.append(PostedEvent(job["metadata"]["name"], type_, reason, message))

    async def list_pods(
        self, selector: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        await self._call("list_pods", selector, namespace)
        items = [
            copy.deepcopy(pod) for pod in self.pods.values() if _matches(pod, selector, namespace)
        ]
        return items, str(self._version)

    async def watch_pods(
        self,
        selector: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        await self._call("watch_pods", selector, resource_version, namespace)
        replay = self._replay(
            self._pod_log,
            resource_version,
            timeout_seconds,
            lambda obj: _matches(obj, selector, namespace),
        )
        async for event in replay:
            yield event

    async def list_services(
        self, selector: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        await self._call("list_services", selector, namespace)
        items = [
            copy.deepcopy(s) for s in self.services.values() if _matches(s, selector, namespace)
        ]
        return items, str(self._version)

    async def watch_services(
        self,
        selector: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        await self._call("watch_services", selector, resource_version, namespace)
        replay = self._replay(
            self._service_log,
            resource_version,
            timeout_seconds,
            lambda obj: _matches(obj, selector, namespace),
        )
        async for event in replay:
            yield event

    async def list_nodes(self) -> tuple[list[dict[str, Any]], str]:
        await self._call("list_nodes")
        return [copy.deepcopy(node) for node in self.nodes.values()], str(self._version)

    async def watch_nodes(
        self, resource_version: str, timeout_seconds: int = 300
    ) -> AsyncIterator[dict[str, Any]]:
        await self._call("watch_nodes", resource_version)
        async for event in self._replay(
            self._node_log, resource_version, timeout_seconds, lambda obj: True
        ):
            yield event

    async def list_kueue(
        self, plural: str, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        await self._call("list_kueue", plural, namespace)
        if not self.kueue_installed:
            raise NotFound("the server could not find the requested resource", 404)
        items = [
            copy.deepcopy(obj)
            for (kind, ns, _), obj in self.kueue.items()
            if kind == plural and namespace in (None, ns)
        ]
        return items, str(self._version)

    async def watch_kueue(
        self,
        plural: str,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        await self._call("watch_kueue", plural, resource_version, namespace)

        def wanted(obj: Mapping[str, Any]) -> bool:
            meta = obj["metadata"]
            return bool(meta["plural"] == plural and namespace in (None, meta.get("namespace", "")))

        async for event in self._replay(self._kueue_log, resource_version, timeout_seconds, wanted):
            event["object"]["metadata"].pop("plural")
            yield event

    async def get_kueue(self, plural: str, name: str) -> dict[str, Any]:
        await self._call("get_kueue", plural, name)
        obj = self.kueue.get((plural, "", name))
        if obj is None:
            raise NotFound(f'{plural} "{name}" not found', 404)
        return copy.deepcopy(obj)

    @action
    async def create_workload(self, namespace: str, workload: Mapping[str, Any]) -> bool:
        name = workload["metadata"]["name"]
        await self._call("create_workload", namespace, name)
        if (kueue.WORKLOADS, namespace, name) in self.kueue:
            return False
        created = copy.deepcopy(dict(workload))
        created["metadata"].update(
            uid=f"workload-uid-{next(self._uids)}",
            resourceVersion=self._next_version(),
            generation=1,
        )
        self._kueue_changed(kueue.WORKLOADS, "ADDED", created)
        return True

    @action
    async def patch_workload(
        self,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        resource_version: str | None,
        status: bool = False,
    ) -> None:
        await self._call("patch_workload", namespace, name, copy.deepcopy(dict(patch)), status)
        workload = self.kueue.get((kueue.WORKLOADS, namespace, name))
        if workload is None:
            raise NotFound(f'workloads "{name}" not found', 404)
        if resource_version is not None and resource_version != workload["metadata"].get(
            "resourceVersion"
        ):
            raise Conflict(f'Operation cannot be fulfilled on workloads "{name}"', 409)
        part = "status" if status else "metadata"
        updated = copy.deepcopy(workload)
        updated[part] = _merge(updated.get(part) or {}, patch.get(part) or {})
        updated["metadata"]["resourceVersion"] = self._next_version()
        self._kueue_changed(kueue.WORKLOADS, "MODIFIED", updated)

    async def _replay(
        self,
        log: list[tuple[int, dict[str, Any]]],
        resource_version: str,
        timeout_seconds: int,
        wanted: Callable[[Mapping[str, Any]], bool],
    ) -> AsyncIterator[dict[str, Any]]:
        """The events of `log` after `resource_version`, then new ones as they come, until
        the watch's timeout (or Gone once watches are expired)."""
        loop = asyncio.get_running_loop()
        ends = loop.time() + timeout_seconds
        seen = int(resource_version)
        epoch = self._watch_epoch
        while True:
            if epoch != self._watch_epoch:
                raise Gone(f"too old resource version: {seen}", 410)
            changed = self._changed
            for version, event in log:
                if version > seen and wanted(event["object"]):
                    yield copy.deepcopy(event)
                seen = max(seen, version)
            try:
                # Not asyncio.wait_for: on Python 3.11 it loses a cancellation that comes as
                # the event is set, and stopping the controller then waits out the timeout.
                async with asyncio.timeout(ends - loop.time()):
                    await changed.wait()
            except TimeoutError:
                return  # the server ends every watch after its timeout

    # Inside ---------------------------------------------------------------------

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    async def _call(self, method: str, *args: Any) -> None:
        self.calls.append(Call(method, asyncio.get_running_loop().time(), args))
        if self.latency:
            await asyncio.sleep(self.latency)
        if self._errors[method]:
            error = self._errors[method].pop(0)
            raise type(error)(error.message, error.status)  # a fresh one each time

    def _remove_pod(self, namespace: str, name: str) -> None:
        pod = self.pods.pop((namespace, name))
        pod["metadata"]["resourceVersion"] = self._next_version()
        self._pod_changed("DELETED", pod)

    def _pod_changed(self, type_: str, pod: dict[str, Any]) -> None:
        version = int(pod["metadata"]["resourceVersion"])
        self._pod_log.append((version, {"type": type_, "object": copy.deepcopy(pod)}))
        self._wake_watches()

    def _service_changed(self, type_: str, service: dict[str, Any]) -> None:
        version = int(service["metadata"]["resourceVersion"])
        self._service_log.append((version, {"type": type_, "object": copy.deepcopy(service)}))
        self._wake_watches()

    def _node_changed(self, type_: str, node: dict[str, Any]) -> None:
        version = int(node["metadata"]["resourceVersion"])
        self._node_log.append((version, {"type": type_, "object": copy.deepcopy(node)}))
        self._wake_watches()

    def _kueue_changed(self, plural: str, type_: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.kueue[plural, meta.get("namespace", ""), meta["name"]] = obj
        logged = copy.deepcopy(obj)
        logged["metadata"]["plural"] = plural  # which watch it is for; removed when sent
        self._kueue_log.append((int(meta["resourceVersion"]), {"type": type_, "object": logged}))
        self._wake_watches()

    def _wake_watches(self) -> None:
        # Each watch waits on the Event that was current when it last looked.
        self._changed.set()
        self._changed = asyncio.Event()

    def _job_changed(self, type_: str, job: dict[str, Any]) -> None:
        handler = self.on_job_event
        if handler is not None:
            # Later, as a watch delivers it, not inside the call that made the change.
            asyncio.get_running_loop().call_soon(handler, type_, copy.deepcopy(job))


def _owned(obj: Mapping[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences", []))


def _merge(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386): null removes a key, objects merge, the rest replaces."""
    merged = dict(target)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _matches(obj: Mapping[str, Any], selector: str, namespace: str | None) -> bool:
    """`namespace` (None: all) and a label selector of `key` / `key=value` terms."""
    meta = obj["metadata"]
    if namespace is not None and meta.get("namespace") != namespace:
        return False
    labels = meta.get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if key not in labels or (value and labels[key] != value):
            return False
    return True
