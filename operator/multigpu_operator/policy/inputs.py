"""What one reconcile pass reads, as one value (pure).

Built by keyword by the controller (controller/job_pass.py) from its caches, as
Kubernetes' Job controller reads a sync's inputs into one struct (`syncJobCtx`):
reconcile.decide() takes this and nothing else, so a test or a benchmark states a pass
by naming what it varies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import JobStatus
from multigpu_operator.plan import DesiredState
from multigpu_operator.plan.workload import PriorityClass
from multigpu_operator.policy.kube.kueue_admission import Admission
from multigpu_operator.policy.placement.occupancy import Occupancy
from multigpu_operator.policy.runtime_use import RuntimeUse
from multigpu_operator.policy.steps.refusals import Refusal
from multigpu_operator.policy.training import TrainingReport

Pod = Mapping[str, Any]
# A stored job planned: the job and its desired children, or why it cannot be planned
# (reconcile.plan_object).
Planned = tuple[Job, DesiredState] | str


@dataclass(frozen=True, kw_only=True)
class PassInputs:
    planned: Planned
    previous: JobStatus  # the status written before this pass, read once
    generation: int  # metadata.generation (a job that cannot be planned has no Job)
    now: datetime
    # spec.managedBy names this operator (or nothing); another controller's job gets
    # no pods and no status from us.
    managed_here: bool = True
    pods: tuple[Pod, ...] = ()  # the job's own pods as the cache has them
    # Its pods deleted for a fault, as the watch last showed them (policy/step.py).
    gone: tuple[Pod, ...] = ()
    nodes: tuple[Mapping[str, Any], ...] = ()  # the cluster's nodes, trimmed; () unknown
    # What the operator's pods and other workloads' hold on the nodes, read only for a
    # job with spec.placement that has pods to create (policy/placement/occupancy.py).
    occupancy: Occupancy | None = None
    # Names of pods created by earlier passes that the watch has not brought yet.
    unseen: frozenset[str] = frozenset()
    has_service: bool = False  # the job's headless Service exists, as last seen
    queued: bool = False  # runs only when Kueue admits its Workload
    admission: Admission | None = None  # its standing in Kueue, when queued
    workload: Mapping[str, Any] | None = None  # its Kueue Workload, when queued
    kueue_served: bool = False  # Kueue's Workload API is served
    # The job's WorkloadPriorityClass, read when its Workload is to be created (None: it
    # names none, or the class does not exist).
    priority: PriorityClass | None = None
    refusal: Refusal | None = None  # what the API server refused in its last pass
    training: TrainingReport | None = None  # what its processes last reported
    # The generation whose pod template the server last accepted (a dry run or the
    # pods' creates); None: none yet, as far as this operator knows.
    template_checked: int | None = None
    # Since when a status write that only changed pod counts has been held back (None:
    # none is): policy/steps/status.py counts_held_for.
    counts_held_since: datetime | None = None
    # spec.runtimeRef's runtime: the copy the job was merged with before planning, or
    # None in it (the runtime does not exist yet); None: the job names none.
    runtime: RuntimeUse | None = None
