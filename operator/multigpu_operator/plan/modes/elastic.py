"""Elastic: torchrun agents meet through c10d rendezvous; the world is decided per round."""

from __future__ import annotations

from multigpu_operator.api.rules import MSG_ELASTIC_REQUIRED
from multigpu_operator.api.spec import Job
from multigpu_operator.plan import env
from multigpu_operator.plan.errors import PlanError
from multigpu_operator.plan.modes import ModeLayout


def layout(job: Job, replicas: int) -> ModeLayout:
    spec = job.spec.model_copy(update={"replicas": replicas})
    policy = spec.elastic
    if policy is None:  # the API refuses it (api/rules.py); a job stored before may not
        raise PlanError("spec.elastic", MSG_ELASTIC_REQUIRED)
    procs = spec.processes_per_replica
    return ModeLayout(
        world_size=None,
        env=tuple(tuple(env.elastic_env(job, i, policy, procs)) for i in range(replicas)),
    )
