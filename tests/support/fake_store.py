"""The store under the in-memory API server (support/fake_cluster.py): objects by kind,
one resourceVersion counter as etcd has, the log of changes that watches replay, garbage
collection by ownerReferences and finalizers that hold a deleted object; and what someone
other than the operator does to the store: a user (`add_job`, `put`, `remove`), the
kubelet and the scheduler (`set_phase`, `set_unschedulable`), Kueue
(`set_workload_status`), whoever holds a finalizer (`release`)."""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from multigpu_operator.api.spec import API_VERSION, KIND
from multigpu_operator.cluster.errors import NotFound
from multigpu_operator.cluster.kinds import JOBS, PODS, SERVICES, WORKLOADS, Kind

ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped kinds
JobEventHandler = Callable[[str, Mapping[str, Any]], None]


class FakeStore:
    def __init__(self) -> None:
        self.objects: defaultdict[Kind, dict[ObjectKey, dict[str, Any]]] = defaultdict(dict)
        self.on_job_event: JobEventHandler | None = None
        self._version = 0  # the last resourceVersion handed out
        self._uids = itertools.count(1)
        # (version, kind, event, the object as the kind's previous event left it)
        self._log: list[tuple[int, Kind, dict[str, Any], dict[str, Any] | None]] = []
        self._last: dict[tuple[Kind, str, str], dict[str, Any]] = {}  # each object as logged
        self._changed = asyncio.Event()
        self._watch_epoch = 0  # watches started before the current epoch end with Gone

    @property
    def jobs(self) -> dict[ObjectKey, dict[str, Any]]:
        return self.objects[JOBS]

    @property
    def pods(self) -> dict[ObjectKey, dict[str, Any]]:
        return self.objects[PODS]

    @property
    def services(self) -> dict[ObjectKey, dict[str, Any]]:
        return self.objects[SERVICES]

    # What someone else does ---------------------------------------------------------

    def add_job(
        self,
        name: str,
        spec: Mapping[str, Any],
        namespace: str = "ns",
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """Create a MultiGPUJob (kubectl apply); kopf's watch tells the controller."""
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        meta["creationTimestamp"] = "2026-11-22T10:00:00Z"
        if labels:
            meta["labels"] = dict(labels)
        spec = copy.deepcopy(dict(spec))
        job = {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}
        self._store(JOBS, self._created(JOBS, job), "ADDED")

    def set_phase(
        self,
        name: str,
        phase: str,
        exit_code: int | None = None,
        namespace: str = "ns",
        pod_ip: str | None = None,
    ) -> None:
        """Play the scheduler and the kubelet: the pod is bound and in `phase` (with an
        IP when given: support/fake_processes.py serves its processes there)."""
        pod = self.pods[namespace, name]
        pod["spec"]["nodeName"] = "gpu-node-0"
        pod["status"] = {"phase": phase, **({"podIP": pod_ip} if pod_ip else {})}
        if exit_code is not None:
            term = {"exitCode": exit_code, "reason": "Error", "finishedAt": "2026-11-22T10:00:00Z"}
            pod["status"]["containerStatuses"] = [
                {"name": "trainer", "state": {"terminated": term}}
            ]
        self._store(PODS, pod, "MODIFIED")

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
        self._store(PODS, pod, "MODIFIED")

    def set_workload_status(
        self, name: str, status: Mapping[str, Any], namespace: str = "ns"
    ) -> None:
        """Kueue writes a Workload's status (admits, evicts it)."""
        workload = copy.deepcopy(self.objects[WORKLOADS][namespace, name])
        workload["status"] = copy.deepcopy(dict(status))
        self._store(WORKLOADS, workload, "MODIFIED")

    def put(self, kind: Kind, obj: Mapping[str, Any]) -> None:
        """Someone else creates or changes an object (a node joins, a ResourceFlavor)."""
        stored = copy.deepcopy(dict(obj))
        key = self._key(kind, stored["metadata"].get("namespace"), stored["metadata"]["name"])
        self._store(kind, stored, "MODIFIED" if key in self.objects[kind] else "ADDED")
        self._settle(kind, key)

    def remove(self, kind: Kind, name: str, namespace: str = "ns") -> None:
        """Someone else deletes an object (kubectl delete service, a node leaves)."""
        self._remove(kind, self._key(kind, namespace, name))

    def release(self, kind: Kind, name: str, namespace: str = "ns") -> None:
        """Whoever holds the object's finalizers lets go: an object being deleted goes."""
        obj = copy.deepcopy(self.objects[kind][self._key(kind, namespace, name)])
        obj["metadata"].pop("finalizers", None)
        self.put(kind, obj)

    def expire_watches(self) -> None:
        """The watches open now end with 410 Gone, as when etcd has compacted away the
        version they watch from."""
        self._watch_epoch += 1
        self._wake_watches()

    # Inside ---------------------------------------------------------------------

    @staticmethod
    def _key(kind: Kind, namespace: str | None, name: str) -> ObjectKey:
        return (namespace or "") if kind.namespaced else "", name

    def _existing(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self.objects[kind].get(self._key(kind, namespace, name))
        if obj is None:
            raise NotFound(f'{kind.plural} "{name}" not found', 404)
        return obj

    def _settle(self, kind: Kind, key: ObjectKey) -> None:
        """An object being deleted goes once it has no finalizers left."""
        meta = self.objects[kind][key]["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(kind, key)

    def _created(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        """A new object's uid (named after its kind) and, for custom resources, generation."""
        obj["metadata"]["uid"] = f"{kind.plural.removesuffix('s')}-uid-{next(self._uids)}"
        if kind.group:
            obj["metadata"]["generation"] = 1
        return obj

    def _store(self, kind: Kind, obj: dict[str, Any], type_: str) -> dict[str, Any]:
        """Keep `obj` at the next resourceVersion, and tell the watches."""
        meta = obj["metadata"]
        self._version += 1
        meta["resourceVersion"] = str(self._version)
        self.objects[kind][self._key(kind, meta.get("namespace"), meta["name"])] = obj
        self._changed_(kind, type_, obj)
        return obj

    def _remove(self, kind: Kind, key: ObjectKey) -> None:
        obj = self.objects[kind].pop(key)
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        self._changed_(kind, "DELETED", obj)
        # Garbage collection: what the deleted object owned goes with it.
        uid = obj["metadata"].get("uid")
        for child_kind, objects in list(self.objects.items()):
            for child_key, child in list(objects.items()):
                refs = child["metadata"].get("ownerReferences") or []
                if uid and any(ref.get("uid") == uid for ref in refs):
                    self._remove(child_kind, child_key)

    def _changed_(self, kind: Kind, type_: str, obj: dict[str, Any]) -> None:
        version = int(obj["metadata"]["resourceVersion"])
        logged = copy.deepcopy(obj)
        key = (kind, obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
        before = self._last.pop(key, None) if type_ == "DELETED" else self._last.get(key)
        if type_ != "DELETED":
            self._last[key] = logged
        self._log.append((version, kind, {"type": type_, "object": logged}, before))
        self._wake_watches()
        handler = self.on_job_event
        if kind == JOBS and handler is not None:
            # Later, as a watch delivers it, not inside the call that made the change.
            asyncio.get_running_loop().call_soon(handler, type_, copy.deepcopy(obj))

    def _wake_watches(self) -> None:
        # Each watch waits on the Event that was current when it last looked.
        self._changed.set()
        self._changed = asyncio.Event()
