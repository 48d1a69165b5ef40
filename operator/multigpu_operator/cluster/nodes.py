"""The cluster's nodes as the fit check (policy/fit.py) reads them: list once, then
watch, relisting when the watch expires.

Every node is listed (there is no label to select on: any node may be the one a pod
fits), each kept trimmed to its name, labels, taints and allocatable resources, so a
kubelet's heartbeat or a change of the images it holds changes nothing here. A node
event wakes no job: a node that joins gets unschedulable pods bound by the scheduler,
whose pod events reconcile their jobs, and a job waiting on the gang timer looks again
when it is due.

Without the nodes (not listed yet, or RBAC denies it) the snapshot is empty and the
policies treat "no node can ever fit" as unknown, never as true: the operator works as
it did before it read nodes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from multigpu_operator.cluster.errors import ClusterError, Gone
from multigpu_operator.cluster.informer import retry_after
from multigpu_operator.cluster.protocol import Cluster

log = logging.getLogger(__name__)

Node = dict[str, Any]


def trim_node(node: Mapping[str, Any]) -> Node:
    """Keep what the fit check reads."""
    meta = node["metadata"]
    return {
        "metadata": {"name": meta["name"], "labels": dict(meta.get("labels") or {})},
        "spec": {"taints": list((node.get("spec") or {}).get("taints") or [])},
        "status": {"allocatable": dict((node.get("status") or {}).get("allocatable") or {})},
    }


class NodeInformer:
    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._nodes: dict[str, Node] = {}
        self._snapshot: tuple[Node, ...] = ()
        self._stale = False  # _snapshot is older than _nodes

    def nodes(self) -> tuple[Node, ...]:
        """Every known node, trimmed; the same tuple until a node changes."""
        if self._stale:
            self._snapshot = tuple(self._nodes.values())
            self._stale = False
        return self._snapshot

    async def run(self) -> None:
        """List and watch forever; errors back off and relist."""
        backoff, complained = 0.5, False
        while True:
            try:
                rv = await self._relist()
                backoff, complained = 0.5, False
                while True:
                    rv = await self._watch(rv)
            except asyncio.CancelledError:
                raise
            except Gone:
                log.info("node watch expired; relisting")
            except ClusterError as err:
                # Most likely RBAC without nodes: say it once per outage, not every retry.
                if not complained:
                    log.warning(
                        "cannot read nodes (%s); jobs that no node can fit are not told apart "
                        "from a busy cluster until this heals",
                        err.message,
                    )
                    complained = True
                backoff = await retry_after(backoff, 300)
            except Exception:
                log.exception("node watch failed; relisting in %.1fs", backoff)
                backoff = await retry_after(backoff, 300)

    async def _relist(self) -> str:
        items, rv = await self._cluster.list_nodes()
        self._nodes = {node["metadata"]["name"]: trim_node(node) for node in items}
        self._stale = True
        return rv

    async def _watch(self, rv: str) -> str:
        async for event in self._cluster.watch_nodes(rv):
            obj = event["object"]
            rv = obj["metadata"]["resourceVersion"]
            if event["type"] == "BOOKMARK":
                continue
            name = obj["metadata"]["name"]
            if event["type"] == "DELETED":
                self._stale = self._nodes.pop(name, None) is not None or self._stale
                continue
            trimmed = trim_node(obj)
            if self._nodes.get(name) != trimmed:
                self._nodes[name] = trimmed
                self._stale = True
        return rv
