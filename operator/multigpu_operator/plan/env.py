"""The environment contract: every variable the operator sets on a training container.

This module is the only place that names them; docs/env-contract.md documents it and
must change with it (tests/unit/plan/test_env_contract.py checks that, and that each variable
has a reader: the trainer image, torch or torchrun, or a user's script). Values are
strings (Kubernetes requires it). The mode modules choose which groups a pod gets;
nothing here decides per mode.

Two launch styles read these variables: a plain script calling
``init_process_group("env://")`` reads MASTER_*/RANK/WORLD_SIZE, and ``torchrun`` reads
``PET_<FLAG>`` for each of its flags (a command-line flag still wins). Static modes set
both, consistently, so either style works with no flags.
"""

from __future__ import annotations

from typing import Any

from multigpu_operator.api import names
from multigpu_operator.api.lifecycle import ElasticPolicy
from multigpu_operator.api.model_parallel import ModelParallelPolicy
from multigpu_operator.api.spec import Job

EnvVar = dict[str, Any]

# c10d rendezvous options. Only keys c10d reads: it silently ignores unknown ones such
# as `timeout`. The values are c10d's defaults except close_timeout, written out so the
# pod spec shows them.
RDZV_JOIN_TIMEOUT_S = 600
RDZV_LAST_CALL_TIMEOUT_S = 30
RDZV_CLOSE_TIMEOUT_S = 60


# The port our trainer images serve their Prometheus metrics on (+ LOCAL_RANK), and
# where the operator reads a job's progress (policy/training.py). Set by default, and
# unlike every other variable here a training container may set its own value (0: no
# metrics, no progress): existing jobs set it to choose the port.
METRICS_PORT_VAR = "MGJ_TRAINER_METRICS_PORT"
DEFAULT_METRICS_PORT = 9300


def value(name: str, val: str | int) -> EnvVar:
    return {"name": name, "value": str(val)}


def field_ref(name: str, field_path: str) -> EnvVar:
    # apiVersion is what the API server would default it to: the stored pod then
    # equals the planned one.
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": field_path}}}


def backend(gpus_per_replica: int) -> str:
    """The torch.distributed backend a script should use: NCCL needs GPUs."""
    return "nccl" if gpus_per_replica > 0 else "gloo"


def common_env(job: Job, index: int, replicas: int) -> list[EnvVar]:
    """Every mode: who am I, and what the job looks like."""
    spec = job.spec
    env = [
        value("MGJ_JOB_NAME", job.ref.name),
        value("MGJ_JOB_NAMESPACE", job.ref.namespace),
        value("MGJ_JOB_UID", job.ref.uid),
        value("MGJ_MODE", spec.mode.value),
        value("MGJ_REPLICA_INDEX", index),
        value("MGJ_REPLICAS", replicas),
        value("MGJ_GPUS_PER_REPLICA", spec.gpus_per_replica),
        value("MGJ_BACKEND", backend(spec.gpus_per_replica)),
        # Unbuffered output keeps the ranks' log lines in the order they happen.
        value("PYTHONUNBUFFERED", 1),
    ]
    if not spec.uses_gpus:
        # Without it a container that asks for no GPU still sees every GPU of the node.
        env.append(value("NVIDIA_VISIBLE_DEVICES", "void"))
    return env


def defaulted_env() -> list[EnvVar]:
    """Variables the operator sets unless the training container sets them itself."""
    return [value("MGJ_TRAINER_METRICS_PORT", DEFAULT_METRICS_PORT)]


def metrics_port(env: list[EnvVar] | tuple[EnvVar, ...]) -> int:
    """The metrics port a container's env gives (0 when off or not a plain number)."""
    for var in env:
        if var.get("name") == METRICS_PORT_VAR:
            raw = var.get("value")
            return int(raw) if isinstance(raw, str) and raw.isdigit() else 0
    return 0


def master_addr(job: Job) -> str:
    """Replica 0's stable DNS name (headless Service, publishNotReadyAddresses)."""
    return names.pod_dns_name(job.ref.name, job.ref.namespace, 0)


def static_env(job: Job, index: int, replicas: int, procs_per_replica: int) -> list[EnvVar]:
    """A fixed world: N pods of P processes each, WORLD_SIZE = N*P processes.

    RANK and LOCAL_RANK identify a process, so they are only known here when the pod
    runs one process; with several, torchrun (or the user's spawner, as
    RANK = NODE_RANK * NPROC_PER_NODE + LOCAL_RANK) assigns them.
    """
    addr = master_addr(job)
    port = job.spec.master_port
    env = [
        value("MASTER_ADDR", addr),
        value("MASTER_PORT", port),
        value("WORLD_SIZE", replicas * procs_per_replica),
    ]
    if procs_per_replica == 1:
        env += [value("RANK", index), value("LOCAL_RANK", 0), value("LOCAL_WORLD_SIZE", 1)]
    env += [
        value("NNODES", replicas),
        value("NODE_RANK", index),
        value("NPROC_PER_NODE", procs_per_replica),
        value("PET_NNODES", replicas),
        value("PET_NODE_RANK", index),
        value("PET_NPROC_PER_NODE", procs_per_replica),
        value("PET_MASTER_ADDR", addr),
        value("PET_MASTER_PORT", port),
    ]
    return env


def pipeline_env(stages: int, policy: ModelParallelPolicy) -> list[EnvVar]:
    return [
        value("MGJ_PIPELINE_STAGES", stages),
        value("MGJ_MICRO_BATCHES", policy.micro_batches),
        value("MGJ_PIPELINE_SCHEDULE", policy.schedule.value),
    ]


def rdzv_conf(index: int) -> str:
    # is_host is explicit because c10d otherwise guesses it by resolving the endpoint
    # name, and a new pod's DNS record can lag its start: replica 0 would then not
    # host the store and every agent would wait for one that never comes.
    is_host = "true" if index == 0 else "false"
    return (
        f"join_timeout={RDZV_JOIN_TIMEOUT_S},"
        f"last_call_timeout={RDZV_LAST_CALL_TIMEOUT_S},"
        f"close_timeout={RDZV_CLOSE_TIMEOUT_S},"
        f"is_host={is_host}"
    )


def elastic_env(
    job: Job, index: int, policy: ElasticPolicy, procs_per_replica: int
) -> list[EnvVar]:
    """torchrun with c10d rendezvous: ranks and world size are decided per round.

    No RANK/WORLD_SIZE/MASTER_*/NODE_RANK: torchrun assigns them to each worker.
    PET_STANDALONE is never set (an empty value crashes torchrun).
    """
    return [
        value("PET_NNODES", f"{policy.min_replicas}:{policy.max_replicas}"),
        value("PET_NPROC_PER_NODE", procs_per_replica),
        value("PET_RDZV_BACKEND", "c10d"),
        value("PET_RDZV_ENDPOINT", f"{master_addr(job)}:{job.spec.master_port}"),
        # Unique per job: the default id "none" would let two jobs meet.
        value("PET_RDZV_ID", job.ref.uid),
        value("PET_RDZV_CONF", rdzv_conf(index)),
        value("PET_MAX_RESTARTS", policy.max_restarts),
        # Workers reach rank 0 by the address its agent publishes; pod hostnames may not
        # resolve cluster-wide, the pod IP does.
        field_ref("PET_LOCAL_ADDR", "status.podIP"),
        # Without it a scale-up of a running job deadlocks (torch 2.14): the surviving
        # rank 0 never republishes the master address for the new round.
        value("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", 1),
    ]
