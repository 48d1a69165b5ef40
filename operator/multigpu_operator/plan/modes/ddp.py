"""DistributedDataParallel: a fixed world of one process per GPU (one per pod on CPU)."""

from __future__ import annotations

from multigpu_operator.api.spec import Job
from multigpu_operator.plan import env
from multigpu_operator.plan.modes import ModeLayout


def layout(job: Job, replicas: int) -> ModeLayout:
    spec = job.spec.model_copy(update={"replicas": replicas})
    procs = spec.processes_per_replica
    return ModeLayout(
        world_size=spec.world_size,
        env=tuple(tuple(env.static_env(job, i, replicas, procs)) for i in range(replicas)),
    )
