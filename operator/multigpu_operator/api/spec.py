"""Typed model of a MultiGPUJob's spec.

The CRD schema (api/schema.py) applies these same defaults on the API server; `from_dict`
applies them again so that offline tools (`mgj render`) see exactly what the operator
sees. Defaults therefore live here, once, and api/schema.py and api/rules.py read them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from multigpu_operator.api.lifecycle import (
    DEFAULT_BELOW_MIN_ACTION,
    DEFAULT_BELOW_MIN_TIMEOUT_SECONDS,
    BelowMinAction,
    GangPolicy,
    RunPolicy,
)

GROUP = "multigpu.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "MultiGPUJob"
PLURAL = "multigpujobs"
SINGULAR = "multigpujob"
SHORT_NAME = "mgj"

# Defaults shared with the CRD schema.
DEFAULT_REPLICAS = 1
DEFAULT_GPUS_PER_REPLICA = 1
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_MASTER_PORT = 29500
DEFAULT_SHM_SIZE = "2Gi"
DEFAULT_ELASTIC_MAX_RESTARTS = 3
DEFAULT_MICRO_BATCHES = 4
TRAINER_CONTAINER = "trainer"
# Kueue's plain pod-group integration: what a job's pods carry when the job has a queue.
KUEUE_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
KUEUE_POD_GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
KUEUE_POD_GROUP_TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
# Longest job name whose children stay valid DNS labels: pods are `<name>-<index>`
# (index up to 5 digits) and their hostnames must fit in 63 characters.
MAX_NAME_LENGTH = 56


class Mode(enum.StrEnum):
    DATA_PARALLEL = "DataParallel"
    DISTRIBUTED_DATA_PARALLEL = "DistributedDataParallel"
    MODEL_PARALLEL = "ModelParallel"
    ELASTIC = "Elastic"


class Launcher(enum.StrEnum):
    # The container runs `torchrun ...` (or anything reading PET_* variables).
    TORCHRUN = "Torchrun"
    # The container runs a plain script calling init_process_group("env://").
    SCRIPT = "Script"


class PipelineSchedule(enum.StrEnum):
    GPIPE = "GPipe"
    ONE_F_ONE_B = "1F1B"


DEFAULT_LAUNCHER = Launcher.TORCHRUN
DEFAULT_SCHEDULE = PipelineSchedule.GPIPE


@dataclass(frozen=True)
class ElasticPolicy:
    min_replicas: int
    max_replicas: int
    max_restarts: int = DEFAULT_ELASTIC_MAX_RESTARTS
    # How long fewer than min_replicas pods may be running before on_below_min applies.
    below_min_timeout_seconds: int = DEFAULT_BELOW_MIN_TIMEOUT_SECONDS
    on_below_min: BelowMinAction = DEFAULT_BELOW_MIN_ACTION


@dataclass(frozen=True)
class ModelParallelPolicy:
    # None: one stage per process (several pods) or per GPU (one pod).
    stages: int | None = None
    micro_batches: int = DEFAULT_MICRO_BATCHES
    schedule: PipelineSchedule = DEFAULT_SCHEDULE


@dataclass(frozen=True)
class JobSpec:
    mode: Mode
    replicas: int = DEFAULT_REPLICAS
    gpus_per_replica: int = DEFAULT_GPUS_PER_REPLICA
    gpu_resource: str = DEFAULT_GPU_RESOURCE
    gpu_product: str | None = None
    launcher: Launcher = DEFAULT_LAUNCHER
    master_port: int = DEFAULT_MASTER_PORT
    # None disables the /dev/shm volume.
    shm_size: str | None = DEFAULT_SHM_SIZE
    elastic: ElasticPolicy | None = None
    model_parallel: ModelParallelPolicy | None = None
    run_policy: RunPolicy = field(default_factory=RunPolicy)
    gang: GangPolicy = field(default_factory=GangPolicy)
    # Suspended: the job keeps its status but has no pods (Kueue admits by unsuspending).
    suspend: bool = False
    # The pod template exactly as the user wrote it (a PodTemplateSpec as a dict).
    template: Mapping[str, Any] = field(default_factory=dict)

    @property
    def uses_gpus(self) -> bool:
        return self.gpus_per_replica > 0

    @property
    def processes_per_replica(self) -> int:
        """Processes in one pod: one drives all GPUs for DataParallel and for a
        model split inside a single pod; otherwise one process per GPU (or one on CPU)."""
        if self.mode is Mode.DATA_PARALLEL:
            return 1
        if self.mode is Mode.MODEL_PARALLEL and self.replicas == 1:
            return 1
        return max(self.gpus_per_replica, 1)

    @property
    def world_size(self) -> int:
        """Number of training processes (what WORLD_SIZE counts), at spec.replicas pods."""
        return self.replicas * self.processes_per_replica

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> JobSpec:
        """Build from a spec dict as stored by the API server (or a user's file)."""
        elastic = spec.get("elastic")
        model_parallel = spec.get("modelParallel")
        shm = spec.get("shmSize", DEFAULT_SHM_SIZE)
        return cls(
            mode=Mode(spec["mode"]),
            replicas=int(spec.get("replicas", DEFAULT_REPLICAS)),
            gpus_per_replica=int(spec.get("gpusPerReplica", DEFAULT_GPUS_PER_REPLICA)),
            gpu_resource=str(spec.get("gpuResource", DEFAULT_GPU_RESOURCE)),
            gpu_product=spec.get("gpuProduct") or None,
            launcher=Launcher(spec.get("launcher", DEFAULT_LAUNCHER)),
            master_port=int(spec.get("masterPort", DEFAULT_MASTER_PORT)),
            shm_size=str(shm) if shm not in (None, "", "0") else None,
            elastic=(
                ElasticPolicy(
                    min_replicas=int(elastic["minReplicas"]),
                    max_replicas=int(elastic["maxReplicas"]),
                    max_restarts=int(elastic.get("maxRestarts", DEFAULT_ELASTIC_MAX_RESTARTS)),
                    below_min_timeout_seconds=int(
                        elastic.get("belowMinTimeoutSeconds", DEFAULT_BELOW_MIN_TIMEOUT_SECONDS)
                    ),
                    on_below_min=BelowMinAction(
                        elastic.get("onBelowMin", DEFAULT_BELOW_MIN_ACTION)
                    ),
                )
                if elastic
                else None
            ),
            model_parallel=(
                ModelParallelPolicy(
                    stages=(
                        int(model_parallel["stages"])
                        if model_parallel.get("stages") is not None
                        else None
                    ),
                    micro_batches=int(model_parallel.get("microBatches", DEFAULT_MICRO_BATCHES)),
                    schedule=PipelineSchedule(model_parallel.get("schedule", DEFAULT_SCHEDULE)),
                )
                if model_parallel is not None
                else (ModelParallelPolicy() if spec["mode"] == Mode.MODEL_PARALLEL else None)
            ),
            run_policy=RunPolicy.from_dict(spec.get("runPolicy")),
            gang=GangPolicy.from_dict(spec.get("gang")),
            suspend=bool(spec.get("suspend", False)),
            template=spec.get("template") or {},
        )


@dataclass(frozen=True)
class JobRef:
    """Identity of one MultiGPUJob: what owner references and env need."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class Job:
    ref: JobRef
    spec: JobSpec
    generation: int = 1
    # The job's kueue.x-k8s.io/queue-name label: its pods then form a Kueue pod group.
    queue_name: str | None = None

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Job:
        meta = obj["metadata"]
        return cls(
            ref=JobRef(
                namespace=meta.get("namespace", "default"),
                name=meta["name"],
                uid=meta.get("uid", ""),
            ),
            spec=JobSpec.from_dict(obj.get("spec", {})),
            generation=int(meta.get("generation", 1)),
            queue_name=(meta.get("labels") or {}).get(KUEUE_QUEUE_NAME) or None,
        )
