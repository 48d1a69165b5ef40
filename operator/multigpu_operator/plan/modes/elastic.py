"""Elastic: torchrun agents meet through c10d rendezvous; the world is decided per round."""

from __future__ import annotations

from multigpu_operator.api.spec import Job
from multigpu_operator.plan import env
from multigpu_operator.plan.modes import ModeLayout


def layout(job: Job, replicas: int) -> ModeLayout:
    spec = job.spec.model_copy(update={"replicas": replicas})
    policy = spec.elastic
    # A valid Elastic job has one (api/rules.py).
    assert policy is not None
    procs = spec.processes_per_replica
    return ModeLayout(
        world_size=None,
        env=tuple(tuple(env.elastic_env(job, i, policy, procs)) for i in range(replicas)),
    )
