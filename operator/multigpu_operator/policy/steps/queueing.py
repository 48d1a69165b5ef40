"""Admission by Kueue (pure): a queued job runs only while Kueue admits its Workload.

The step: not admitted yet -> no pods, phase Suspended with reason WaitingForAdmission
and Kueue's message (the quota it lacks); admitted -> a fresh attempt starts on the
flavors Kueue assigned (decide() gives the pods their node labels and tolerations);
evicted or preempted -> the pods go and the job is Suspended with Kueue's reason and
message, counted neither as a failure nor as a restart. When it is admitted again the
next attempt starts, and the trainer resumes from its checkpoints.

`workload_change` is what the operator writes on the Workload, as Kueue's own job
framework does for the job kinds it integrates (pkg/controller/jobframework,
reconciler.go): the Workload when it is missing; once an evicted job's pods are gone,
the quota reservation released (Requeued, QuotaReserved False, Admitted False, no
admission) so that Kueue queues it again; Finished when the job ends; and Kueue's
resource-in-use finalizer dropped once the Workload is finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from multigpu_operator.api import kueue
from multigpu_operator.api.spec import Job
from multigpu_operator.api.status import TERMINAL, ConditionType, JobStatus, Phase
from multigpu_operator.plan import DesiredState, PlanError
from multigpu_operator.plan.workload import admitted_pods
from multigpu_operator.policy.failures.fail import fail
from multigpu_operator.policy.kube.conditions import Event, cleared, condition
from multigpu_operator.policy.kube.kueue_admission import Admission, Queued
from multigpu_operator.policy.kube.pods import name_of
from multigpu_operator.policy.kube.timestamps import rfc3339
from multigpu_operator.policy.step import Decision, Observed, Outcome, Progress, WorkloadChange

WAITING = "WaitingForAdmission"
PREEMPTED = "Preempted"
EVICTED = "Evicted"
# Kueue's eviction reasons after which it queues the Workload again at once (the
# others, such as a pods-ready timeout, go through its requeue backoff).
_REQUEUED_AT_ONCE = frozenset({kueue.EVICTED_BY_PREEMPTION, "NodeFailures"})


def with_admission(desired: DesiredState, admission: Admission | None) -> DesiredState | str:
    """The desired pods as Kueue's admission places them, or why they cannot be."""
    if admission is None or admission.state is not Queued.ADMITTED:
        return desired
    try:
        return admitted_pods(desired, admission.info)
    except PlanError as err:
        return str(err)


def admission(seen: Observed, progress: Progress) -> Outcome:
    queued = seen.admission
    if queued is None or seen.job.spec.suspend:
        return Outcome()  # not queued in Kueue; or suspended by its user (policy/suspension)
    if seen.unplaceable:
        return fail("InvalidPodTemplate", seen.unplaceable)
    if queued.state is Queued.ADMITTED:
        return _admitted(seen, progress, queued)
    if queued.state is Queued.FINISHED:
        return Outcome()  # the job ended and said so; cleanup keeps it there
    if queued.state is Queued.EVICTED:
        reason = PREEMPTED if queued.reason == kueue.EVICTED_BY_PREEMPTION else EVICTED
        msg = f"Kueue evicted the job ({queued.reason}): {queued.message}; its pods are deleted"
        msg += " until it is admitted again"
    else:
        reason = WAITING
        msg = f"waiting for Kueue to admit the job from queue {seen.job.queue_name}"
        if queued.message:
            msg += f": {queued.message}"
    return Outcome(
        delete_pods=tuple(name_of(p) for p in seen.up_to(progress.attempt)),
        changes=(
            condition(ConditionType.SUSPENDED, True, reason, msg),
            cleared(ConditionType.RUNNING, reason, msg),
        ),
        stop=Phase.SUSPENDED,
    )


def _admitted(seen: Observed, progress: Progress, queued: Admission) -> Outcome:
    if seen.previous_phase is not Phase.SUSPENDED:
        return Outcome()
    resumed = progress.resumed(seen)
    msg = f"admitted by Kueue to ClusterQueue {queued.cluster_queue}: "
    msg += f"starting attempt {resumed.attempt}"
    return Outcome(
        changes=(
            condition(ConditionType.SUSPENDED, False, "Admitted", msg),
            Event("Normal", "Admitted", msg),
        ),
        progress=resumed,
    )


def workload_change(
    seen: Observed, decision: Decision, workload: Mapping[str, Any] | None
) -> WorkloadChange | None:
    """What the Workload needs after this pass (None: nothing)."""
    queued = seen.admission
    if queued is None:
        return None
    phase = decision.status.phase or Phase.PENDING
    if workload is None:
        return WorkloadChange(create=True) if phase not in TERMINAL else None
    workload_status = workload.get("status") or {}
    conditions = {c["type"]: c for c in workload_status.get("conditions") or []}
    now = rfc3339(seen.now)
    generation = workload["metadata"].get("generation", 1)

    def set_condition(ctype: str, value: bool, reason: str, message: str) -> None:
        old = conditions.get(ctype) or {}
        text = "True" if value else "False"
        conditions[ctype] = {
            "type": ctype,
            "status": text,
            "reason": reason,
            "message": message[:32768],
            "observedGeneration": generation,
            "lastTransitionTime": old["lastTransitionTime"] if old.get("status") == text else now,
        }

    if queued.state is Queued.FINISHED:
        finalizers = workload["metadata"].get("finalizers") or []
        return (
            WorkloadChange(release=True) if kueue.RESOURCE_IN_USE_FINALIZER in finalizers else None
        )
    if phase in TERMINAL:
        reason = "Succeeded" if phase is Phase.SUCCEEDED else "Failed"
        message = _condition_message(decision.status, phase)
        set_condition(kueue.FINISHED, True, reason, message)
        return WorkloadChange(status={"conditions": list(conditions.values())})
    if queued.state is Queued.EVICTED and workload_status.get("admission") and not seen.pods:
        # Kueue's job framework releases the quota once the job is no longer active.
        evicted = conditions[kueue.EVICTED]
        reason, message = evicted.get("reason", ""), evicted.get("message", "")
        set_condition(kueue.REQUEUED, reason in _REQUEUED_AT_ONCE, reason, message)
        set_condition(kueue.QUOTA_RESERVED, False, "Pending", message)
        set_condition(kueue.ADMITTED, False, "NoReservation", "The workload has no reservation")
        return WorkloadChange(status={"conditions": list(conditions.values()), "admission": None})
    return None


def queued_in_kueue(mode: str, served: bool, job: Job) -> bool:
    """Whether `job` runs only when Kueue admits it: labelled with a queue, and MGJ_KUEUE
    `on`, or `auto` with Kueue's Workload API `served`."""
    if mode == "off" or not job.queue_name:
        return False
    return mode == "on" or served


def multikueue_dispatched(job: Job) -> bool:
    """Whether MultiKueue runs `job` in a worker cluster: its Workload only is ours."""
    return bool(job.queue_name and job.spec.managed_by == kueue.MULTIKUEUE_CONTROLLER)


def dispatched_workload_change(workload: Mapping[str, Any] | None) -> WorkloadChange | None:
    """For a job that MultiKueue runs in a worker cluster (spec.managedBy
    kueue.x-k8s.io/multikueue): only the Workload, Kueue's job-framework part, is the
    operator's here. MultiKueue admits it, mirrors the worker's status onto the job and
    finishes the Workload; the finished Workload is then released."""
    if workload is None:
        return WorkloadChange(create=True)
    finished = any(
        c["type"] == kueue.FINISHED and c.get("status") == "True"
        for c in (workload.get("status") or {}).get("conditions") or []
    )
    finalizers = workload["metadata"].get("finalizers") or []
    if finished and kueue.RESOURCE_IN_USE_FINALIZER in finalizers:
        return WorkloadChange(release=True)
    return None


def _condition_message(status: JobStatus, phase: Phase) -> str:
    ctype = ConditionType.SUCCEEDED if phase is Phase.SUCCEEDED else ConditionType.FAILED
    for cond in status.conditions or ():
        if cond.type == ctype:
            return cond.message or ""
    return str(phase)


def workload_waits(installed: bool, prebuilt: str | None) -> str | None:
    """Why a queued job's missing Workload cannot be created yet, if it cannot."""
    if not installed:
        return "Kueue's Workload API is not served (MGJ_KUEUE=on)"
    if prebuilt:
        return f"MultiKueue's Workload {prebuilt!r} is not there yet"
    return None


def holds_quota(workload: Mapping[str, Any]) -> bool:
    """Whether `workload` has Kueue's resource-in-use finalizer."""
    return kueue.RESOURCE_IN_USE_FINALIZER in (workload["metadata"].get("finalizers") or [])


def release_after_delete(workload: Mapping[str, Any]) -> bool:
    """Whether the Workload of a deleted job is to lose Kueue's finalizer: garbage
    collection is deleting it (Kueue's job framework releases a Workload being deleted)."""
    return bool(workload["metadata"].get("deletionTimestamp")) and holds_quota(workload)


def priority_class_missing(name: str) -> str:
    return f"WorkloadPriorityClass {name!r} does not exist"
