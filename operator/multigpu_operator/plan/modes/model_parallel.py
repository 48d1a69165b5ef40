"""ModelParallel: the model is split into pipeline stages.

One pod: one process, stage s on local GPU s mod gpusPerReplica (the manual
``.to("cuda:k")`` split). Several pods: one process per GPU, as in DDP, and
stage = RANK (torch.distributed.pipelining, one stage per process).
"""

from __future__ import annotations

from dataclasses import replace

from multigpu_operator.api.spec import Job, ModelParallelPolicy
from multigpu_operator.plan import env
from multigpu_operator.plan.errors import PlanError
from multigpu_operator.plan.modes import ModeLayout


def stages(job: Job, replicas: int) -> int:
    """Pipeline stages: spec.modelParallel.stages, else one per process (several pods)
    or one per GPU of the single pod."""
    spec = replace(job.spec, replicas=replicas)
    policy = spec.model_parallel or ModelParallelPolicy()
    world = spec.world_size
    if policy.stages is None:
        return world if replicas > 1 else max(spec.gpus_per_replica, 1)
    if policy.stages < 1:
        raise PlanError("spec.modelParallel.stages", f"is {policy.stages}; must be at least 1")
    if replicas > 1 and policy.stages != world:
        # GPipe and 1F1B hold one stage per process.
        raise PlanError(
            "spec.modelParallel.stages",
            f"is {policy.stages}, but {replicas} pods x {spec.processes_per_replica} "
            f"processes hold one stage each ({world}); set it to {world} or leave it out",
        )
    return policy.stages


def layout(job: Job, replicas: int) -> ModeLayout:
    spec = replace(job.spec, replicas=replicas)
    policy = spec.model_parallel or ModelParallelPolicy()
    if policy.micro_batches < 1:
        raise PlanError(
            "spec.modelParallel.microBatches", f"is {policy.micro_batches}; must be at least 1"
        )
    procs = spec.processes_per_replica
    pipeline = env.pipeline_env(stages(job, replicas), policy)
    return ModeLayout(
        world_size=spec.world_size,
        env=tuple(
            tuple(env.static_env(job, i, replicas, procs) + pipeline) for i in range(replicas)
        ),
    )
