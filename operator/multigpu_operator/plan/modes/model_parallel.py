"""ModelParallel: the model is split into pipeline stages.

One pod: one process, stage s on local GPU s mod gpusPerReplica (the manual
``.to("cuda:k")`` split). Several pods: one process per GPU, as in DDP, and
stage = RANK (torch.distributed.pipelining, one stage per process).
"""

from __future__ import annotations

from multigpu_operator.api.model_parallel import ModelParallelPolicy
from multigpu_operator.api.spec import Job
from multigpu_operator.plan import env
from multigpu_operator.plan.modes import ModeLayout


def stages(job: Job, replicas: int) -> int:
    """Pipeline stages: spec.modelParallel.stages, else one per process (several pods)
    or one per GPU of the single pod."""
    spec = job.spec.model_copy(update={"replicas": replicas})
    policy = spec.model_parallel or ModelParallelPolicy()
    if policy.stages is not None:
        return policy.stages
    return spec.world_size if replicas > 1 else max(spec.gpus_per_replica, 1)


def layout(job: Job, replicas: int) -> ModeLayout:
    spec = job.spec.model_copy(update={"replicas": replicas})
    policy = spec.model_parallel or ModelParallelPolicy()
    procs = spec.processes_per_replica
    pipeline = env.pipeline_env(stages(job, replicas), policy)
    return ModeLayout(
        world_size=spec.world_size,
        env=tuple(
            tuple(env.static_env(job, i, replicas, procs) + pipeline) for i in range(replicas)
        ),
    )
