"""spec.modelParallel: how a ModelParallel job splits its model into pipeline stages."""

from __future__ import annotations

import enum

from pydantic import Field

from multigpu_operator.api.base import ApiModel, Int32
from multigpu_operator.api.limits import MAX_MICRO_BATCHES, MAX_PIPELINE_STAGES


class PipelineSchedule(enum.StrEnum):
    GPIPE = "GPipe"
    ONE_F_ONE_B = "1F1B"


class ModelParallelPolicy(ApiModel):
    """Model (pipeline) parallelism settings; only allowed when mode is ModelParallel,
    where they default as shown when omitted. With replicas 1 one process splits the
    model across the pod's GPUs and pipelines micro-batches through the pieces; with
    several replicas every process holds one stage (torch.distributed.pipelining)."""

    # None: one stage per process (several pods) or per GPU (one pod).
    stages: Int32 | None = Field(
        None,
        ge=1,
        le=MAX_PIPELINE_STAGES,
        description=(
            "Number of pipeline stages. With several replicas it must equal "
            "replicas x max(gpusPerReplica, 1), one stage per process; omit it to get that. "
            "With replicas 1 it defaults to the pod's GPU count. A stage holds at least one "
            "layer, which bounds it."
        ),
    )
    micro_batches: Int32 = Field(
        4,
        ge=1,
        le=MAX_MICRO_BATCHES,
        description=(
            "Micro-batches each batch is split into to keep all stages busy. More "
            "micro-batches shrink the pipeline bubble but make each one smaller; each holds "
            "at least one sample."
        ),
    )
    schedule: PipelineSchedule = Field(
        PipelineSchedule.GPIPE,
        description=(
            "Pipeline schedule: GPipe (all forwards, then all backwards; simplest, most "
            "activation memory) or 1F1B (interleaves one forward with one backward; less "
            "activation memory)."
        ),
    )
