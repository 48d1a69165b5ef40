"""DataParallel: one pod, one process driving all of the pod's GPUs (nn.DataParallel)."""

from __future__ import annotations

from multigpu_operator.api.rules import MSG_DATA_PARALLEL_REPLICAS
from multigpu_operator.api.spec import Job
from multigpu_operator.plan import env
from multigpu_operator.plan.errors import PlanError
from multigpu_operator.plan.modes import ModeLayout


def layout(job: Job, replicas: int) -> ModeLayout:
    if replicas != 1:  # the API refuses it (api/rules.py); a job stored before may not
        raise PlanError("spec.replicas", MSG_DATA_PARALLEL_REPLICAS)
    # Still a world of one, so code written for torch.distributed runs unchanged.
    return ModeLayout(world_size=1, env=(tuple(env.static_env(job, 0, 1, 1)),))
