"""The OpenAPI v3 schema of a MultiGPUJob: spec, status and the root object.

Defaults and enums come from api/spec.py; the cross-field rules attached as
x-kubernetes-validations come from api/rules.py. api/validation.py walks these same
schemas offline.
"""

from __future__ import annotations

from multigpu_operator.api.rules import NAME_RULES, SPEC_RULES
from multigpu_operator.api.schema_policies import (
    elastic_schema,
    gang_schema,
    run_policy_schema,
    suspend_schema,
)
from multigpu_operator.api.schema_types import Schema, enum_of, integer
from multigpu_operator.api.spec import (
    DEFAULT_GPU_RESOURCE,
    DEFAULT_GPUS_PER_REPLICA,
    DEFAULT_LAUNCHER,
    DEFAULT_MASTER_PORT,
    DEFAULT_MICRO_BATCHES,
    DEFAULT_REPLICAS,
    DEFAULT_SCHEDULE,
    DEFAULT_SHM_SIZE,
    TRAINER_CONTAINER,
    Launcher,
    Mode,
    PipelineSchedule,
)

PHASES = ["Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed"]
# A Kubernetes quantity without sign (what resource.Quantity accepts), e.g. 2Gi, 512Mi, 1e9.
QUANTITY_PATTERN = (
    r"^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _string_map(description: str) -> Schema:
    return {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": description,
    }


def _model_parallel_schema() -> Schema:
    return {
        "type": "object",
        "description": (
            "Model (pipeline) parallelism settings; only allowed when mode is ModelParallel, "
            "where they default as shown when omitted. With replicas 1 one process splits the "
            "model across the pod's GPUs and pipelines micro-batches through the pieces; with "
            "several replicas every process holds one stage (torch.distributed.pipelining)."
        ),
        "properties": {
            "stages": integer(
                "Number of pipeline stages. With several replicas it must equal "
                "replicas x max(gpusPerReplica, 1), one stage per process; omit it to get that. "
                "With replicas 1 it defaults to the pod's GPU count.",
                1,
                format="int32",
            ),
            "microBatches": integer(
                "Micro-batches each batch is split into to keep all stages busy. More "
                "micro-batches shrink the pipeline bubble but make each one smaller. Default "
                f"{DEFAULT_MICRO_BATCHES}.",
                1,
                DEFAULT_MICRO_BATCHES,
                format="int32",
            ),
            "schedule": enum_of(
                "Pipeline schedule: GPipe (all forwards, then all backwards; simplest, most "
                "activation memory) or 1F1B (interleaves one forward with one backward; less "
                f"activation memory). Default {DEFAULT_SCHEDULE}.",
                [str(s) for s in PipelineSchedule],
                str(DEFAULT_SCHEDULE),
            ),
        },
    }


def _template_schema() -> Schema:
    # The PodSpec schema is not embedded: it would make the CRD too large for client-side
    # `kubectl apply` (its last-applied annotation), and the API server validates the pods
    # in full when the operator creates them.
    return {
        "type": "object",
        "description": (
            "Pod template (a PodTemplateSpec) for every replica. The training container is the "
            f'one named "{TRAINER_CONTAINER}", else the first container; the operator adds to '
            "it the GPU limits, the rendezvous environment (MASTER_ADDR, MASTER_PORT, RANK, "
            "WORLD_SIZE, LOCAL_RANK, PET_*) and the /dev/shm volume."
        ),
        "required": ["spec"],
        "properties": {
            "metadata": {
                "type": "object",
                "description": "Labels and annotations copied to every pod.",
                "properties": {
                    "labels": _string_map("Labels added to every pod."),
                    "annotations": _string_map("Annotations added to every pod."),
                },
            },
            "spec": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": (
                    "A core/v1 PodSpec, validated by the API server when the operator creates "
                    "the pods (only containers[].name is checked here)."
                ),
                "required": ["containers"],
                "properties": {
                    "containers": {
                        "type": "array",
                        "minItems": 1,
                        "description": (
                            f'Containers of the pod. The one named "{TRAINER_CONTAINER}" (else '
                            "the first) runs the training; others run alongside it."
                        ),
                        "items": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                            "required": ["name"],
                            "properties": {
                                "name": {
                                    "type": "string",
                                    "minLength": 1,
                                    "description": "Container name (a DNS-1123 label).",
                                },
                            },
                        },
                    },
                },
            },
        },
    }


def spec_schema() -> Schema:
    """The OpenAPI v3 schema of `spec`, with its cross-field rules."""
    return {
        "type": "object",
        "description": "Desired state of the training job.",
        "required": ["mode", "template"],
        "properties": {
            "mode": enum_of(
                "Training technique, which decides how many processes each pod runs and what "
                "they are told. DataParallel: one pod, one process driving all its GPUs "
                "(torch.nn.DataParallel); replicas must be 1. DistributedDataParallel: one "
                "process per GPU in every pod, all in one process group (WORLD_SIZE = replicas "
                "x gpusPerReplica). ModelParallel: the model is split into pipeline stages, "
                "inside one process (replicas 1) or one stage per process across pods. "
                "Elastic: torchrun with c10d rendezvous; the pod count may change between "
                "spec.elastic.minReplicas and maxReplicas while training continues.",
                [str(m) for m in Mode],
            ),
            "replicas": integer(
                "Number of pods. DataParallel requires 1. For Elastic it is the desired pod "
                "count, driven by the scale subresource (kubectl scale, HPA) and kept within "
                "spec.elastic.minReplicas..maxReplicas; the other modes form a fixed world of "
                f"this many pods. Default {DEFAULT_REPLICAS}.",
                1,
                DEFAULT_REPLICAS,
                format="int32",
            ),
            "gpusPerReplica": integer(
                "GPUs each pod asks for (a limit on gpuResource). 0 trains on CPU with the gloo "
                "backend and hides the node's GPUs. Each GPU gets its own process "
                "(LOCAL_RANK), except for DataParallel and for ModelParallel with replicas 1, "
                f"where one process drives all of the pod's GPUs. Default "
                f"{DEFAULT_GPUS_PER_REPLICA}.",
                0,
                DEFAULT_GPUS_PER_REPLICA,
                format="int32",
            ),
            "gpuResource": {
                "type": "string",
                "minLength": 1,
                "default": DEFAULT_GPU_RESOURCE,
                "description": (
                    "Extended resource name the GPUs are requested as, e.g. a MIG profile "
                    f"such as nvidia.com/mig-1g.10gb. Default {DEFAULT_GPU_RESOURCE}."
                ),
            },
            "gpuProduct": {
                "type": "string",
                "minLength": 1,
                "description": (
                    "GPU model to run on, matched against the node label nvidia.com/gpu.product "
                    "set by NVIDIA GPU feature discovery (e.g. NVIDIA-H100-80GB-HBM3). Unset: "
                    "any node with the resource."
                ),
            },
            "launcher": enum_of(
                "How the training container starts its processes. Torchrun: the container "
                "runs torchrun (or anything reading PET_* variables); the operator sets "
                "PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR/PORT and, for "
                "Elastic, PET_RDZV_*, and torchrun spawns one process per GPU. Script: the "
                "container runs a plain script calling "
                'init_process_group(init_method="env://") with RANK, WORLD_SIZE, LOCAL_RANK, '
                "MASTER_ADDR and MASTER_PORT set; with several GPUs per pod the script must "
                "start one process per GPU itself. Elastic requires Torchrun. Default "
                f"{DEFAULT_LAUNCHER}.",
                [str(launcher) for launcher in Launcher],
                str(DEFAULT_LAUNCHER),
            ),
            "masterPort": integer(
                "TCP port of the rank-0 process group store (MASTER_PORT); for Elastic the "
                f"c10d rendezvous port. Default {DEFAULT_MASTER_PORT}.",
                1,
                DEFAULT_MASTER_PORT,
                maximum=65535,
                format="int32",
            ),
            "shmSize": {
                "type": "string",
                "nullable": True,
                "pattern": QUANTITY_PATTERN,
                "default": DEFAULT_SHM_SIZE,
                "description": (
                    "Size of the memory-backed /dev/shm mounted into every pod (a quantity "
                    "such as 2Gi), for DataLoader workers and NCCL's shared-memory transport; "
                    "containers otherwise get 64Mi. It counts against the pod's memory limit. "
                    f'"0" or null mounts none. Default {DEFAULT_SHM_SIZE}.'
                ),
            },
            "elastic": elastic_schema(),
            "runPolicy": run_policy_schema(),
            "gang": gang_schema(),
            "suspend": suspend_schema(),
            "modelParallel": _model_parallel_schema(),
            "template": _template_schema(),
        },
        "x-kubernetes-validations": [r.validation() for r in SPEC_RULES],
    }


def _condition_schema() -> Schema:
    return {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {
                "type": "string",
                "description": "Condition type: Created, Running, Succeeded or Failed.",
            },
            "status": enum_of("Whether the condition holds.", ["True", "False", "Unknown"]),
            "reason": {
                "type": "string",
                "description": "Machine-readable CamelCase reason for the last transition.",
            },
            "message": {"type": "string", "description": "Human-readable details."},
            "lastTransitionTime": {
                "type": "string",
                "format": "date-time",
                "description": "When status last changed.",
            },
            "observedGeneration": {
                "type": "integer",
                "format": "int64",
                "minimum": 0,
                "description": "metadata.generation the condition was set for.",
            },
        },
    }


def status_schema() -> Schema:
    def count(what: str) -> Schema:
        return {"type": "integer", "format": "int32", "minimum": 0, "description": what}

    def time(what: str) -> Schema:
        return {"type": "string", "format": "date-time", "description": what}

    return {
        "type": "object",
        "description": "Observed state of the job, written by the operator.",
        "properties": {
            "phase": enum_of(
                "Pending until every pod runs (Elastic: minReplicas pods), then Running; "
                "Restarting from a retried failure until the new attempt runs; Suspended "
                "while spec.suspend is true; Succeeded when every pod succeeded (Elastic: "
                "training finished); Failed when the job cannot continue. Succeeded and "
                "Failed are final. docs/lifecycle.md has the rules.",
                PHASES,
            ),
            "conditions": {
                "type": "array",
                "description": "Latest observations of the job's state, one per type.",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "items": _condition_schema(),
            },
            "replicas": count("Pods that exist now (read by the scale subresource)."),
            "selector": {
                "type": "string",
                "description": "Label selector of the job's pods (read by the scale subresource).",
            },
            "worldSize": count("Training processes in the current run (what WORLD_SIZE counts)."),
            "pods": {
                "type": "object",
                "description": "Pods of the job by phase.",
                "properties": {
                    "pending": count("Pods not yet running."),
                    "running": count("Pods running."),
                    "succeeded": count("Pods that exited 0."),
                    "failed": count("Pods that failed."),
                },
            },
            "attempt": count(
                "Current attempt, from 1. A retry after a failure, a resume and a requeue "
                "after a gang timeout each start a new one; pods carry it as the label "
                "multigpu.dev/attempt."
            ),
            "restarts": count(
                "Failures retried so far (new attempts, or Elastic pods replaced); at most "
                "runPolicy.backoffLimit."
            ),
            "lastFailure": {
                "type": "object",
                "description": "The most recent pod failure the operator acted on.",
                "properties": {
                    "pod": {"type": "string", "description": "The failed pod."},
                    "replicaIndex": {
                        "type": "integer",
                        "nullable": True,
                        "description": "Its replica index.",
                    },
                    "exitCode": {
                        "type": "integer",
                        "nullable": True,
                        "description": "The trainer's exit code; null if the pod was lost.",
                    },
                    "reason": {"type": "string", "description": "Why it ended."},
                    "attempt": count("The attempt it belonged to."),
                },
            },
            "createdAttempt": count("The last attempt all of whose pods were seen created."),
            "targetReplicas": count("Elastic: the pod count last planned (for scale events)."),
            "countedFailures": {
                "type": "array",
                "description": "Elastic: UIDs of failed pods already counted as restarts.",
                "items": {"type": "string"},
            },
            "unscheduledSince": time("Since when pods have been unschedulable (gang timer)."),
            "belowMinSince": time("Elastic: since when fewer than minReplicas pods run."),
            "requeueAt": time("After a gang timeout with Requeue: when pods are created again."),
            "startTime": time(
                "When the operator first acted on the job, or its last resume "
                "(activeDeadlineSeconds counts from here)."
            ),
            "completionTime": time("When the job reached Succeeded or Failed."),
            "observedGeneration": {
                "type": "integer",
                "format": "int64",
                "minimum": 0,
                "description": "metadata.generation this status reflects.",
            },
        },
    }


def root_schema() -> Schema:
    return {
        "type": "object",
        "description": (
            "A multi-GPU PyTorch training job: the operator creates one pod per replica, wired "
            "for the chosen mode (DataParallel, DistributedDataParallel, ModelParallel or "
            "Elastic), and a headless Service that gives the pods stable DNS names."
        ),
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            # Declaring metadata.name lets the name rules point fieldPath at it.
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": spec_schema(),
            "status": status_schema(),
        },
        "x-kubernetes-validations": [r.validation() for r in NAME_RULES],
    }
