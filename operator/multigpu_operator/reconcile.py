"""One reconcile pass (pure): a job, its desired pods, its observed pods, its previous
status and the time -> the new status, the pods to delete and create, and when to look
again. docs/lifecycle.md describes these rules for users.

The pass is the ordered list of steps below, each a pure function in policy/ that
returns an Outcome; the outcomes are merged in order, the first one that stops the pass
ends it, and the status is built once, at the end (policy/steps/status.py); a refusal of the
last pass by the API server turns into the status here too (policy/steps/refusals.py).

Level-triggered: the result depends only on what exists now and on the status written
before, never on what the operator remembers, so a restart at any point finishes what
was started. Counters (attempt, restarts) are written to the status before any pod is
touched, and pods carry the attempt that created them: pods of an older attempt are
deleted, pods of a newer one (seen through a stale cache) are never touched, and a name
is reused only once its previous pod is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from multigpu_operator.api.base import field_errors
from multigpu_operator.api.spec import Job, Mode
from multigpu_operator.api.status import TERMINAL
from multigpu_operator.plan import DesiredState, PlanError, plan_job
from multigpu_operator.plan.workload import build_workload
from multigpu_operator.policy.failures.avoidance import avoiding
from multigpu_operator.policy.failures.fail import invalid_job
from multigpu_operator.policy.inputs import PassInputs
from multigpu_operator.policy.kube.pods import name_of
from multigpu_operator.policy.placement.placed import admitted
from multigpu_operator.policy.placement.placed import placed as placement_of
from multigpu_operator.policy.runtime_use import waiting_for_runtime, with_runtime_recorded
from multigpu_operator.policy.step import (
    Decision,
    Observed,
    Outcome,
    Progress,
    WorkloadChange,
    merged,
)
from multigpu_operator.policy.steps import (
    cleanup,
    containers,
    create,
    deadline,
    elastic,
    gang,
    placement,
    queueing,
    requeue,
    restarts,
    stall,
    status,
    suspension,
)
from multigpu_operator.policy.steps.progress import published_progress
from multigpu_operator.policy.steps.queueing import (
    dispatched_workload_change,
    multikueue_dispatched,
)
from multigpu_operator.policy.steps.refusals import after_refusal
from multigpu_operator.policy.steps.restarts import unjudged_gone
from multigpu_operator.policy.steps.template_check import pod_to_dry_run

Step = Callable[[Observed, Progress], Outcome]

STEPS: tuple[Step, ...] = (
    cleanup.stay_finished,  # Succeeded and Failed are final
    suspension.suspend_or_resume,  # suspended: no pods; resumed: a fresh attempt
    queueing.admission,  # queued in Kueue: pods only while admitted
    deadline.active_deadline,  # runPolicy.activeDeadlineSeconds
    requeue.wait_to_requeue,  # after a gang timeout with Requeue
    restarts.failures_and_restarts,  # a new attempt, an elastic pod replaced, or Failed
    stall.stall_watchdog,  # runPolicy.stall: the step stood still while every pod runs
    placement.domain_choice,  # spec.placement: no domain fits; another after the gang timeout
    gang.gang_start,  # gang.timeoutSeconds while pods are unschedulable; no node fits
    containers.container_states,  # containers the kubelet cannot start; spec.startPolicy
    elastic.elastic_size,  # below minReplicas; scale to spec.replicas
    create.missing_pods,  # the desired pods whose names are free
)


def decide(inputs: PassInputs) -> Decision:
    """One pass over `inputs`: first what ends it before the steps (a runtime that does
    not exist yet, a spec that cannot be planned, another controller's job, a refusal of
    the last pass), then the steps; a runtime's copy new to the status is written first."""
    use = inputs.runtime
    if use is not None and use.snapshot is None and inputs.managed_here:
        return waiting_for_runtime(inputs.previous, inputs.generation, inputs.now, use)
    return with_runtime_recorded(_decide(inputs), use)


def _decide(inputs: PassInputs) -> Decision:
    if isinstance(inputs.planned, str):
        return unplannable(inputs, inputs.planned)
    job, desired = inputs.planned
    if not job.spec.managed_here:
        return elsewhere(inputs, job, desired)
    if inputs.refusal is not None:
        return after_refusal(inputs.previous, job.generation, inputs.refusal, inputs.now)
    seen = observe(inputs, job, desired)
    progress = Progress.from_status(seen.previous, seen.now)
    outcomes: list[Outcome] = []
    for step in STEPS:
        outcome = step(seen, progress)
        outcomes.append(outcome)
        progress = outcome.progress or progress
        if outcome.stop is not None:
            break
    phase = outcomes[-1].stop or status.phase_of(seen, progress)
    if phase in TERMINAL:
        outcomes.append(cleanup.after_finish(seen))  # clean-pod policy, TTL
    outcomes.append(published_progress(seen, phase))  # status.progress, when it may be written
    decision = status.conclude(seen, progress, merged(outcomes), phase)
    return replace(
        decision,
        # Created by an earlier pass and not seen yet: not created twice.
        create_pods=tuple(p for p in decision.create_pods if name_of(p) not in inputs.unseen),
        create_service=None if phase in TERMINAL or inputs.has_service else desired.service,
        # A new placement is written before the pods pinned to it are created.
        status_waits=status.first_write_waits(seen.previous, decision)
        and not (seen.placement and seen.placement.changed),
        status_held_for=status.counts_held_for(
            seen.previous, decision.status, inputs.counts_held_since, inputs.now
        ),
        workload=with_body(
            queueing.workload_change(seen, decision, inputs.workload), inputs, job, desired
        ),
        dry_run_pod=pod_to_dry_run(
            decision, desired, inputs.pods, job.generation, inputs.template_checked
        ),
    )


def unplannable(inputs: PassInputs, why: str) -> Decision:
    """A stored spec that cannot be planned fails the job, naming the field; another
    controller's job is left alone."""
    if not inputs.managed_here:
        return Decision(inputs.previous, (), None, only_workload=True)
    update = invalid_job(inputs.previous, inputs.generation, "InvalidSpec", why, inputs.now)
    return Decision(update.status, update.events, update.entered, only_status=True)


def elsewhere(inputs: PassInputs, job: Job, desired: DesiredState) -> Decision:
    """Another controller's job: no pods, no status; a job MultiKueue dispatches still
    needs its Workload here (Kueue's job-framework part is ours)."""
    change = None
    if multikueue_dispatched(job) and inputs.queued:
        change = dispatched_workload_change(inputs.workload)
    workload = with_body(change, inputs, job, desired)
    return Decision(inputs.previous, (), None, workload=workload, only_workload=True)


def with_body(
    change: WorkloadChange | None, inputs: PassInputs, job: Job, desired: DesiredState
) -> WorkloadChange | None:
    """A Workload to create gets its body, with the priority the pass read, or why it
    cannot be created yet."""
    if change is None or not change.create:
        return change
    waits = queueing.workload_waits(inputs.kueue_served, job.prebuilt_workload)
    if not waits and job.priority_class and inputs.priority is None:
        waits = queueing.priority_class_missing(job.priority_class)
    if waits:
        return replace(change, waits=waits)
    return replace(change, body=build_workload(job, desired, inputs.priority))


def observe(inputs: PassInputs, job: Job, desired: DesiredState) -> Observed:
    """The snapshot every step reads: the desired pods where Kueue admitted them and off
    the nodes to avoid, and the pods gone for a fault that no pass has judged yet."""
    placed = queueing.with_admission(desired, inputs.admission)
    planned = desired if isinstance(placed, str) else placed
    # New pods are kept off the nodes where infrastructure faults ended the job's pods.
    previous = inputs.previous
    avoided, avoidance = avoiding(planned, previous.avoided_nodes or (), inputs.nodes)
    elastic = job.spec.mode is Mode.ELASTIC
    # Kueue places a queued job (its topology assignment), the operator any other.
    if inputs.queued:
        topology = inputs.admission.info.topology if inputs.admission else None
        where = admitted(job, previous, topology, inputs.nodes)
    else:
        where = placement_of(job, planned, previous, inputs.nodes, inputs.occupancy, avoided)
    ghosts = unjudged_gone(elastic, inputs.pods, inputs.gone, previous, inputs.now)
    return Observed(
        job=job,
        desired=planned,
        pods=(*inputs.pods, *ghosts),
        previous=previous,
        now=inputs.now,
        nodes=inputs.nodes,
        admission=inputs.admission,
        unplaceable=placed if isinstance(placed, str) else "",
        avoided=avoided,
        avoidance=avoidance,
        placement=where,
        training=inputs.training,
        gone=inputs.gone,
    )


def plan_object(body: Mapping[str, Any]) -> tuple[Job, DesiredState] | str:
    """A stored MultiGPUJob -> the job and its desired children, or why it cannot be
    planned (pure: may run in a worker thread). The API server validated the object
    when it was written; one kept from before a stricter CRD (validation ratcheting)
    may not parse, and then pydantic's message names the field."""
    # The same models bound every count (api/limits.py): no stored object makes the
    # operator plan more pods than the API allows.
    try:
        job = Job.from_object(body)
    except ValidationError as err:
        return field_errors(err, "spec")
    try:
        return job, plan_job(job)
    except PlanError as err:
        return str(err)
