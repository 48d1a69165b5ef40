"""The cluster's nodes as the fit check (policy/kube/fit.py) reads them, kept by a Reflector
(cluster/reflector.py).

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

import logging
from collections.abc import Mapping
from typing import Any

from multigpu_operator.cluster.errors import ClusterError
from multigpu_operator.cluster.kinds import NODES
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.cluster.reflector import Reflected, Reflector

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


class NodeInformer(Reflected):
    """Every node, trimmed, as a Reflector lists and watches them."""

    def __init__(self, cluster: Cluster) -> None:
        self._nodes: dict[str, Node] = {}
        self._snapshot: tuple[Node, ...] = ()
        self._stale = False  # _snapshot is older than _nodes
        self.reflector = Reflector(
            "node",
            lambda: cluster.list(NODES),
            lambda rv: cluster.watch(NODES, rv),
            trim_node,
            self,
            backoff_cap=300,
            on_failure=self._cannot_read,
        )

    def nodes(self) -> tuple[Node, ...]:
        """Every known node, trimmed; the same tuple until a node changes."""
        if self._stale:
            self._snapshot = tuple(self._nodes.values())
            self._stale = False
        return self._snapshot

    def replace(self, objects: list[Node]) -> None:
        self._nodes = {node["metadata"]["name"]: node for node in objects}
        self._stale = True

    def apply(self, event: str, node: Node) -> None:
        name = node["metadata"]["name"]
        if event == "DELETED":
            self._stale = self._nodes.pop(name, None) is not None or self._stale
        elif self._nodes.get(name) != node:
            self._nodes[name] = node
            self._stale = True

    def _cannot_read(self, err: ClusterError, failures: int, retry_in: float) -> bool:
        # Most likely RBAC without nodes: say it once per outage, not every retry.
        if failures == 1:
            log.warning(
                "cannot read nodes (%s); jobs that no node can fit are not told apart "
                "from a busy cluster until this heals",
                err.message,
            )
        return True
