"""Elastic: torchrun agents meet through c10d rendezvous; the world is decided per round."""

from __future__ import annotations

from dataclasses import replace

from multigpu_operator.api.spec import Job, Launcher
from multigpu_operator.plan import env
from multigpu_operator.plan.errors import PlanError
from multigpu_operator.plan.modes import ModeLayout


def layout(job: Job, replicas: int) -> ModeLayout:
    spec = replace(job.spec, replicas=replicas)
    policy = spec.elastic
    if policy is None:
        raise PlanError("spec.elastic", "is required when spec.mode is Elastic")
    if spec.launcher is not Launcher.TORCHRUN:
        # Only torchrun's agent takes part in a rendezvous.
        raise PlanError("spec.launcher", f"is {spec.launcher.value}, but Elastic needs Torchrun")
    if policy.min_replicas < 1:
        raise PlanError("spec.elastic.minReplicas", f"is {policy.min_replicas}; must be at least 1")
    if policy.max_replicas < policy.min_replicas:
        raise PlanError(
            "spec.elastic.maxReplicas",
            f"is {policy.max_replicas}, below minReplicas ({policy.min_replicas})",
        )
    if policy.max_restarts < 0:
        raise PlanError("spec.elastic.maxRestarts", f"is {policy.max_restarts}; must be at least 0")
    if not policy.min_replicas <= replicas <= policy.max_replicas:
        raise PlanError(
            "spec.replicas",
            f"is {replicas}, outside spec.elastic [{policy.min_replicas}, {policy.max_replicas}]",
        )
    procs = spec.processes_per_replica
    return ModeLayout(
        world_size=None,
        env=tuple(tuple(env.elastic_env(job, i, policy, procs)) for i in range(replicas)),
    )
