"""Queued jobs' Workloads as read (the reads of Kueue admission; the decisions are
policy/steps/queueing.py's, the writes the actuator's: actuator/kueue.py).

MGJ_KUEUE says whether jobs labelled `kueue.x-k8s.io/queue-name` are queued in Kueue:
`auto` (the default) when Kueue's Workload API is served at start-up, `on` always (a
queued job waits while the API is missing), `off` never (the label is ignored).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from multigpu_operator.cluster.errors import NotFound
from multigpu_operator.cluster.informer import JobKey
from multigpu_operator.cluster.kinds import WORKLOAD_PRIORITY_CLASSES
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.cluster.workloads import WorkloadInformer
from multigpu_operator.plan.workload import PriorityClass

log = logging.getLogger(__name__)

MODES = ("auto", "on", "off")


class KueueJobs:
    """The controller's view of Kueue: the mode, and the Workloads' cache."""

    def __init__(
        self,
        cluster: Cluster,
        enqueue: Callable[[JobKey], None],
        namespace: str | None,
        mode: str,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"MGJ_KUEUE must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self._cluster = cluster
        self.informer = WorkloadInformer(cluster, enqueue, namespace, required=mode == "on")

    async def priority_class(self, name: str) -> PriorityClass | None:
        """The WorkloadPriorityClass `name` (cluster-scoped), None if it does not exist."""
        try:
            found = await self._cluster.get(WORKLOAD_PRIORITY_CLASSES, None, name)
        except NotFound:
            return None
        return PriorityClass(name, int(found.get("value", 0)))
