"""The spec of a MultiGPUJob, declared once.

These typed models are the single source of the API: the CRD's schema is generated from
them (api/schema.py), `mgj render`'s offline validation and defaulting use that
generated schema (api/validation.py), and the planner and reconciler read a `Job` parsed
by them, with the same defaults the API server applies. To add a field, add it here with
its default, bounds and description, then regenerate the CRD
(`python -m multigpu_operator.api.gen`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from multigpu_operator.api import kueue
from multigpu_operator.api.base import ApiModel, Int32, Nullable, defaulted_object
from multigpu_operator.api.lifecycle import ElasticPolicy, GangPolicy, RunPolicy
from multigpu_operator.api.limits import MAX_GPUS_PER_REPLICA, MAX_REPLICAS
from multigpu_operator.api.managed_by import OPERATOR_CONTROLLER, managed_by_us
from multigpu_operator.api.model_parallel import ModelParallelPolicy
from multigpu_operator.api.placement import Placement
from multigpu_operator.api.runtime_ref import RuntimeRef
from multigpu_operator.api.start import StartPolicy
from multigpu_operator.api.template import TRAINER_CONTAINER, Template

GROUP = "multigpu.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "MultiGPUJob"
PLURAL = "multigpujobs"
SINGULAR = "multigpujob"
SHORT_NAME = "mgj"
# A controller name as Kubernetes' Job and JobSet take it: a domain-prefixed path.
CONTROLLER_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?/[-A-Za-z0-9_.]{1,63}$"
# Longest job name whose children stay valid DNS labels: pods are `<name>-<index>`
# (index up to 5 digits) and their hostnames must fit in 63 characters.
MAX_NAME_LENGTH = 56
# A Kubernetes quantity without sign (what resource.Quantity accepts), e.g. 2Gi, 512Mi, 1e9.
QUANTITY_PATTERN = (
    r"^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


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


class DnsNames(enum.StrEnum):
    # Every pod resolves as <job>-<i>.<job>.<namespace>.svc, as JobSet's pods do.
    EVERY_REPLICA = "EveryReplica"
    # Only pod 0: the MASTER_ADDR and rendezvous endpoint, all torchrun needs.
    REPLICA_0 = "Replica0"


class JobSpec(ApiModel):
    """Desired state of the training job."""

    mode: Mode = Field(
        description=(
            "Training technique, which decides how many processes each pod runs and what "
            "they are told. DataParallel: one pod, one process driving all its GPUs "
            "(torch.nn.DataParallel); replicas must be 1. DistributedDataParallel: one "
            "process per GPU in every pod, all in one process group (WORLD_SIZE = replicas "
            "x gpusPerReplica). ModelParallel: the model is split into pipeline stages, "
            "inside one process (replicas 1) or one stage per process across pods. "
            "Elastic: torchrun with c10d rendezvous; the pod count may change between "
            "spec.elastic.minReplicas and maxReplicas while training continues."
        )
    )
    replicas: Int32 = Field(
        1,
        ge=1,
        le=MAX_REPLICAS,
        description=(
            "Number of pods. DataParallel requires 1. For Elastic it is the desired pod "
            "count, driven by the scale subresource (kubectl scale, HPA) and kept within "
            "spec.elastic.minReplicas..maxReplicas; the other modes form a fixed world of "
            "this many pods, which cannot change once the job exists. Bounded by the "
            "largest tested Kubernetes cluster, 5,000 nodes, with one pod per node."
        ),
    )
    gpus_per_replica: Int32 = Field(
        1,
        ge=0,
        le=MAX_GPUS_PER_REPLICA,
        description=(
            "GPUs each pod asks for (a limit on gpuResource). 0 trains on CPU with the gloo "
            "backend and hides the node's GPUs. Each GPU gets its own process "
            "(LOCAL_RANK), except for DataParallel and for ModelParallel with replicas 1, "
            "where one process drives all of the pod's GPUs. Bounded by the most devices a "
            "node has (8 GPUs of 7 MIG instances each)."
        ),
    )
    gpu_resource: str = Field(
        "nvidia.com/gpu",
        min_length=1,
        description=(
            "Extended resource name the GPUs are requested as, e.g. a MIG profile "
            "such as nvidia.com/mig-1g.10gb. A CUDA process sees only one MIG slice, so a "
            "MIG profile allows gpusPerReplica 0 or 1: use more replicas for more slices."
        ),
    )
    gpu_product: str | None = Field(
        None,
        min_length=1,
        description=(
            "GPU model to run on, matched against the node label nvidia.com/gpu.product "
            "set by NVIDIA GPU feature discovery (e.g. NVIDIA-H100-80GB-HBM3). Unset: "
            "any node with the resource."
        ),
    )
    launcher: Launcher = Field(
        Launcher.TORCHRUN,
        description=(
            "How the training container starts its processes. Torchrun: the container "
            "runs torchrun (or anything reading PET_* variables); the operator sets "
            "PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR/PORT and, for "
            "Elastic, PET_RDZV_*, and torchrun spawns one process per GPU. Script: the "
            "container runs a plain script calling "
            'init_process_group(init_method="env://") with RANK, WORLD_SIZE, LOCAL_RANK, '
            "MASTER_ADDR and MASTER_PORT set, one process per pod; so it is refused where a "
            "pod runs several processes (DistributedDataParallel, or ModelParallel across "
            "pods, with gpusPerReplica above 1): use Torchrun there, or one GPU per replica. "
            "Elastic requires Torchrun."
        ),
    )
    master_port: Int32 = Field(
        29500,
        ge=1,
        le=65535,
        description=(
            "TCP port of the rank-0 process group store (MASTER_PORT); for Elastic the "
            "c10d rendezvous port."
        ),
    )
    dns_names: DnsNames = Field(
        DnsNames.EVERY_REPLICA,
        description=(
            "Which pods get a cluster DNS name <job>-<index>.<job>.<namespace>.svc through "
            "the job's headless Service. EveryReplica: every pod, as launchers reading a "
            "host list (MPI, DeepSpeed) need. Replica0: pod 0 alone, the MASTER_ADDR and "
            "rendezvous endpoint, which is all torchrun and init_process_group use (elastic "
            "agents publish their pod IP); the Service's endpoints then change once per "
            "job instead of with each pod: 16-39% less control-plane CPU per 8-pod job "
            "in the runs of docs/benchmarks.md. Immutable."
        ),
    )
    # None (typed job): no /dev/shm volume; "0" means the same.
    shm_size: Annotated[str | None, Nullable] = Field(
        "2Gi",
        pattern=QUANTITY_PATTERN,
        description=(
            "Size of the memory-backed /dev/shm mounted into every pod (a quantity "
            "such as 2Gi), for DataLoader workers and NCCL's shared-memory transport; "
            "containers otherwise get 64Mi. It counts against the pod's memory limit. "
            '"0" or null mounts none.'
        ),
    )
    elastic: ElasticPolicy | None = None
    run_policy: RunPolicy = defaulted_object(RunPolicy)
    gang: GangPolicy = defaulted_object(GangPolicy)
    start_policy: StartPolicy = defaulted_object(StartPolicy)
    placement: Placement | None = None  # by network topology: docs/placement.md
    runtime_ref: RuntimeRef | None = None  # defaults from a runtime: api/runtime.py
    # Like Job's and JobSet's spec.managedBy: unset (or ours) means this operator.
    managed_by: str | None = Field(
        None,
        pattern=CONTROLLER_NAME_PATTERN,
        description=(
            "The controller that runs the job. Unset or "
            f'"{OPERATOR_CONTROLLER}": this operator. Any other value (for instance '
            '"kueue.x-k8s.io/multikueue", which dispatches the job to a worker cluster) '
            "makes the operator create nothing for the job and never write its status. "
            "Immutable."
        ),
    )
    # Suspended: the job keeps its status but has no pods (Kueue admits by unsuspending).
    suspend: bool = Field(
        False,
        description=(
            "true deletes the job's pods and keeps the job (phase Suspended); false again "
            "starts a fresh attempt, which is not counted as a restart and restarts the "
            "activeDeadlineSeconds clock. Queueing systems such as Kueue admit jobs this way."
        ),
    )
    # Set for every ModelParallel job (its defaults when omitted), None otherwise.
    model_parallel: ModelParallelPolicy | None = None
    # The pod template exactly as the user wrote it (a PodTemplateSpec as a dict).
    template: Template = Field(
        description=(
            "Pod template (a PodTemplateSpec) for every replica. The training container is "
            f'the one named "{TRAINER_CONTAINER}", else the first container; the operator '
            "adds to it the GPU limits, the rendezvous environment (MASTER_ADDR, "
            "MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, PET_*) and the /dev/shm volume."
        )
    )

    @model_validator(mode="before")
    @classmethod
    def _model_parallel_defaults(cls, data: Any) -> Any:
        # Not a server default: the API server leaves modelParallel out, and every
        # ModelParallel job then runs with the policy's defaults.
        if (
            isinstance(data, Mapping)
            and data.get("mode") == Mode.MODEL_PARALLEL
            and data.get("modelParallel") is None
        ):
            return {**data, "modelParallel": {}}
        return data

    @field_validator("shm_size")
    @classmethod
    def _zero_shm_is_none(cls, value: str | None) -> str | None:
        return None if value in ("", "0") else value

    @property
    def managed_here(self) -> bool:
        """Whether this operator runs the job (spec.managedBy unset or ours)."""
        return managed_by_us(self.managed_by)

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
    # The job's Kueue labels: the LocalQueue it waits in (None: not queued in Kueue) and
    # its WorkloadPriorityClass (policy/steps/queueing.py).
    queue_name: str | None = None
    priority_class: str | None = None
    # Set by MultiKueue on the copy it creates in a worker cluster: the Workload it made
    # there for the job, which the operator follows instead of creating one.
    prebuilt_workload: str | None = None

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Job:
        """The job of a MultiGPUJob object as the API server stores it (or as a user
        wrote it: the declaration's defaults are those the server applies)."""
        meta = obj["metadata"]
        return cls(
            ref=JobRef(
                namespace=meta.get("namespace", "default"),
                name=meta["name"],
                uid=meta.get("uid", ""),
            ),
            spec=JobSpec.model_validate(obj.get("spec", {})),
            generation=int(meta.get("generation", 1)),
            queue_name=(meta.get("labels") or {}).get(kueue.QUEUE_NAME_LABEL) or None,
            priority_class=(meta.get("labels") or {}).get(kueue.PRIORITY_CLASS_LABEL) or None,
            prebuilt_workload=(meta.get("annotations") or {}).get(kueue.PREBUILT_WORKLOAD_LABEL)
            or (meta.get("labels") or {}).get(kueue.PREBUILT_WORKLOAD_LABEL)
            or None,
        )
