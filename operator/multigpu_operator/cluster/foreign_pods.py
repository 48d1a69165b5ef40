"""What other workloads' pods hold on each node, kept by a Reflector (cluster/reflector.py)
for the domain choice of spec.placement (policy/placement/occupancy.py), as Kueue's
topology-aware scheduling counts the pods it does not admit.

Only pods that are not the operator's (label selector `!<job label>`), are bound to a
node and have not finished are asked for (the API server filters: a pod that finishes
leaves the watch as DELETED), and each is kept as its node and its resource requests
(policy/kube/fit.py pod_requests) alone.

This cache grows with the cluster's pods, not with the operator's children (the design
of cluster/informer.py), so it starts lazily: on the first pass of a job with
spec.placement that Kueue does not place (Kueue's own topology-aware scheduling already
counts every pod), which runs only while this replica leads. An operator whose jobs never
ask for placement never lists another workload's pod. It watches the operator's
namespace scope (settings.namespace): a namespaced operator sees the pods of its own
namespace, as its Role allows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from multigpu_operator.api.names import LABEL_JOB_NAME
from multigpu_operator.cluster.errors import ClusterError
from multigpu_operator.cluster.kinds import PODS
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.cluster.reflector import Reflected, Reflector
from multigpu_operator.policy.kube.fit import pod_requests

log = logging.getLogger(__name__)

SELECTOR = f"!{LABEL_JOB_NAME}"
FIELDS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
_FINISHED = ("Succeeded", "Failed")

Held = Mapping[str, Mapping[str, Decimal]]  # node -> resource -> requests held there


def trim_foreign(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A pod as its node and its requests; `node` is "" for one that holds nothing (not
    bound, or finished: the server filters those, this is for a relist's race)."""
    meta = pod["metadata"]
    spec = pod.get("spec") or {}
    finished = (pod.get("status") or {}).get("phase") in _FINISHED
    return {
        "metadata": {"namespace": meta.get("namespace", ""), "name": meta["name"]},
        "node": "" if finished else str(spec.get("nodeName") or ""),
        "requests": pod_requests(spec),
    }


class ForeignPods(Reflected):
    """Other workloads' pods, as node -> resource -> what they hold there."""

    # How long the first pass that needs this cache waits for its first list; after
    # that (a slow or refused list), passes read what is known without waiting.
    FIRST_LIST_SECONDS = 10.0

    def __init__(self, cluster: Cluster, namespace: str | None = None) -> None:
        self._pods: dict[tuple[str, str], tuple[str, Mapping[str, Decimal]]] = {}
        self._held: dict[str, dict[str, Decimal]] = {}
        self._stale = False  # _held is older than _pods
        self._task: asyncio.Task[None] | None = None
        self._waited = False
        self.reflector = Reflector(
            "foreign pod",
            lambda: cluster.list(PODS, namespace, SELECTOR, FIELDS),
            lambda rv: cluster.watch(PODS, rv, namespace, SELECTOR, fields=FIELDS),
            trim_foreign,
            self,
            backoff_cap=300,
            on_failure=self._cannot_read,
        )

    @property
    def started(self) -> bool:
        return self._task is not None

    async def held(self) -> Held:
        """What other workloads' pods hold, by node; starts the watch on first use and
        waits for its first list (once, up to FIRST_LIST_SECONDS)."""
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name="foreign-pods")
        if not self._waited and not self.synced.is_set():
            try:
                async with asyncio.timeout(self.FIRST_LIST_SECONDS):
                    await self.synced.wait()
            except TimeoutError:
                log.warning("other workloads' pods are not listed yet; placing without them")
            finally:
                self._waited = True
        return self.snapshot()

    def snapshot(self) -> Held:
        """What is known now; the same mapping until a pod comes, goes or moves."""
        if self._stale:
            held: dict[str, dict[str, Decimal]] = {}
            for node, requests in self._pods.values():
                on_node = held.setdefault(node, {})
                for resource, amount in requests.items():
                    on_node[resource] = on_node.get(resource, Decimal(0)) + amount
            self._held, self._stale = held, False
        return self._held

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def replace(self, objects: list[dict[str, Any]]) -> None:
        self._pods = {}
        for pod in objects:
            self._keep(pod)
        self._stale = True

    def apply(self, event: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        before = self._pods.pop(key, None)
        if event != "DELETED":
            self._keep(obj)
        self._stale = self._stale or before != self._pods.get(key)

    def _keep(self, pod: Mapping[str, Any]) -> None:
        if pod["node"]:
            meta = pod["metadata"]
            self._pods[meta["namespace"], meta["name"]] = (pod["node"], pod["requests"])

    def _cannot_read(self, err: ClusterError, failures: int, retry_in: float) -> bool:
        if failures == 1:
            log.warning(
                "cannot read other workloads' pods (%s); placement counts only the "
                "operator's own pods until this heals",
                err.message,
            )
        return True
