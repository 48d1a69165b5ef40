"""A job's runtime in one pass (pure): which copy of it the job is merged with, the job
waiting for a runtime that does not exist yet, and the copy recorded in its status.

A job with spec.runtimeRef is merged (api/runtime_merge.py) with the copy of its runtime
in status.runtime once it has one, so that a runtime edited or deleted later changes
neither the running attempt nor later ones. Until then it is merged with the runtime as
the cache has it, and the pass that first does so writes that copy to the status before
any pod is created. A job whose runtime is not there waits, Pending, its Created
condition naming the runtime; the runtime's arrival wakes it (cluster/runtimes.py). The
operator keeps no memory of this: the status is where the copy lives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from multigpu_operator.api.runtime_merge import RuntimeProblems, merged_job
from multigpu_operator.api.runtime_ref import RuntimeRef, RuntimeSnapshot
from multigpu_operator.api.spec import JobSpec, Mode
from multigpu_operator.api.status import TERMINAL, JobStatus, Phase
from multigpu_operator.policy.step import Decision
from multigpu_operator.policy.steps.refusals import not_created

RUNTIME_NOT_FOUND = "RuntimeNotFound"
# A waiting job looks again this often besides the runtime's events (seconds).
LOOK_AGAIN = 60.0


@dataclass(frozen=True)
class RuntimeUse:
    """The runtime of a job in one pass: the copy it is merged with (None: the runtime
    does not exist, the job waits), and whether that copy is new to its status."""

    ref: RuntimeRef
    snapshot: RuntimeSnapshot | None
    new: bool = False

    @property
    def named(self) -> str:
        return f"{self.ref.kind} {self.ref.name}"


def runtime_ref(body: Mapping[str, Any]) -> RuntimeRef | None:
    """The job's spec.runtimeRef, if it names one (a malformed one: planning says why)."""
    raw = (body.get("spec") or {}).get("runtimeRef")
    if not isinstance(raw, Mapping):
        return None
    try:
        return RuntimeRef.model_validate(raw)
    except ValueError:
        return None


def runtime_use(
    ref: RuntimeRef, previous: JobStatus, found: Mapping[str, Any] | None
) -> RuntimeUse:
    """The copy the job is merged with: its status's, else the runtime `found` now."""
    recorded = previous.runtime
    if recorded is not None and (recorded.kind, recorded.name) == (ref.kind, ref.name):
        return RuntimeUse(ref, recorded)
    if found is None:
        return RuntimeUse(ref, None)
    meta = found.get("metadata") or {}
    copy = {"kind": ref.kind, "name": ref.name, "spec": dict(found.get("spec") or {})}
    if isinstance(meta.get("generation"), int):
        copy["generation"] = meta["generation"]
    snapshot = RuntimeSnapshot.model_validate(copy)
    return RuntimeUse(ref, snapshot, new=True)


def merged_body(body: Mapping[str, Any], use: RuntimeUse) -> Mapping[str, Any] | str:
    """The job as it runs (merged with its runtime's copy), or why it cannot run, each
    field named. Only for a use with a copy."""
    assert use.snapshot is not None
    try:
        merged: Mapping[str, Any] = merged_job(body, use.snapshot.spec, use.named)
    except RuntimeProblems as err:
        return str(err)
    return world_changed(body, merged, use) or merged


def world_changed(body: Mapping[str, Any], merged: Mapping[str, Any], use: RuntimeUse) -> str:
    """Why a running job may not run as `merged`: its world size changed, and its mode
    (the runtime's, which the API server's rule for a job's own mode cannot read) is not
    Elastic. "" when it may."""
    status = JobStatus.read(body.get("status") or {})
    if not status.world_size or status.phase in TERMINAL:
        return ""
    try:
        spec = JobSpec.model_validate(merged["spec"])
    except ValueError:
        return ""  # planning names the field
    if spec.mode is Mode.ELASTIC or spec.world_size == status.world_size:
        return ""
    return (
        f"spec.replicas: the world size of a running {spec.mode} job is fixed "
        f"({status.world_size} processes, now {spec.world_size}): spec.replicas cannot "
        f"change unless spec.mode is Elastic (the mode of {use.named})"
    )


def variant(use: RuntimeUse | None) -> str:
    """What tells one copy of a runtime from another, for the plan cache."""
    if use is None or use.snapshot is None:
        return ""
    return f"{use.named}@{use.snapshot.generation}"


def waiting_for_runtime(
    previous: JobStatus, generation: int, now: datetime, use: RuntimeUse
) -> Decision:
    """A job whose runtime does not exist yet: Pending, nothing created, the Created
    condition naming the runtime (a Warning event once). A finished job stays as it is."""
    if previous.phase in TERMINAL:
        return Decision(previous, (), None, only_status=True)
    where = "" if use.ref.kind.startswith("Cluster") else " in the job's namespace"
    message = f"waiting for {use.named} named in spec.runtimeRef, which does not exist{where}"
    if previous.phase is None:
        previous = previous.merged(JobStatus(phase=Phase.PENDING, reason=RUNTIME_NOT_FOUND))
    update = not_created(previous, generation, RUNTIME_NOT_FOUND, message, now)
    status = update.status.merged(JobStatus(observed_generation=generation))
    return Decision(status, update.events, None, only_status=True, requeue_after=LOOK_AGAIN)


def with_runtime_recorded(decision: Decision, use: RuntimeUse | None) -> Decision:
    """`decision` with the runtime's copy in the status when it is new, written before
    any pod is created (the first write does not wait for the pods then)."""
    if use is None or not use.new or use.snapshot is None or decision.only_workload:
        return decision
    status = decision.status.merged(JobStatus(runtime=use.snapshot))
    return replace(decision, status=status, status_waits=False, status_held_for=0.0)
