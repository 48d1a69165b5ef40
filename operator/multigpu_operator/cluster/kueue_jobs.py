"""Queued jobs' Workloads as read (the reads of Kueue admission; the decisions are
policy/queueing.py's, the writes the actuator's: actuator/kueue.py).

MGJ_KUEUE says whether jobs labelled `kueue.x-k8s.io/queue-name` are queued in Kueue:
`auto` (the default) when Kueue's Workload API is served at start-up, `on` always (a
queued job waits while the API is missing), `off` never (the label is ignored).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from multigpu_operator.api.spec import Job
from multigpu_operator.cluster.informer import JobKey
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.cluster.workloads import WorkloadInformer
from multigpu_operator.policy.admission import Admission, admission_of

log = logging.getLogger(__name__)

MODES = ("auto", "on", "off")


class KueueJobs:
    """The controller's view of Kueue: which jobs are queued, and where each stands."""

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
        self.informer = WorkloadInformer(cluster, enqueue, namespace, required=mode == "on")

    def queued(self, job: Job) -> bool:
        """Whether `job` runs only when Kueue admits it."""
        if self.mode == "off" or not job.queue_name:
            return False
        return self.mode == "on" or self.informer.installed

    def standing(self, key: JobKey, job: Job) -> tuple[Admission, dict[str, Any] | None]:
        """Where a queued job stands, and its Workload as last seen."""
        workload = self.informer.workload_of(key, job)
        return admission_of(workload, self.informer.flavors_by_name()), workload
