"""A job's planned pods -> processes on this machine (pure).

The pods come from the operator's own planner (`plan_job`); this module changes only
what makes sense in a cluster alone:

- addresses: rank 0 and the rendezvous endpoint are 127.0.0.1, on a port picked at run
  time (several local runs must not collide on spec.masterPort);
- `$(VAR)` references and downward-API fields resolve as the kubelet would (kubelet.py);
- GPUs: pod i gets its own slice through CUDA_VISIBLE_DEVICES; with `cpu` a GPU job runs
  each GPU as a CPU process on gloo, so WORLD_SIZE and ranks stay as planned;
- the process runs the container's command with the current Python first on PATH.

Everything about the machine comes in as a `Machine`; local/runner.py finds it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from multigpu_operator.api.spec import Job, Mode
from multigpu_operator.api.template import trainer_index
from multigpu_operator.local.kubelet import LOCALHOST, LocalPlanError, expand, resolve_env
from multigpu_operator.local.machine import Machine, device_slices
from multigpu_operator.local.volumes import rebase, volume_dirs
from multigpu_operator.plan import DesiredState
from multigpu_operator.plan.env import defaulted_env

__all__ = ["LocalPlan", "LocalPlanError", "LocalProcess", "Machine", "plan_local"]

# Kubernetes' default terminationGracePeriodSeconds.
DEFAULT_GRACE_PERIOD_S = 30
CONTAINERS = "spec.template.spec.containers"

# Variables that an inherited shell environment must not leak into a pod (a run started
# inside another torchrun job, say): each process gets only what its pod would. Other
# variables pass (PATH, HOME, caches, training knobs such as MGJ_EPOCHS); the pod's own
# env wins over them.
_CLUSTER_ONLY_VARS = frozenset(
    {
        "MASTER_ADDR",
        "MASTER_PORT",
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "GROUP_WORLD_SIZE",
        "ROLE_RANK",
        "ROLE_WORLD_SIZE",
        "ROLE_NAME",
        "NNODES",
        "NODE_RANK",
        "NPROC_PER_NODE",
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
    }
)
_CLUSTER_ONLY_PREFIXES = ("PET_", "TORCHELASTIC_")


@dataclass(frozen=True)
class LocalProcess:
    """One pod's training container as a local process."""

    pod: str
    index: int
    container: str
    argv: tuple[str, ...]
    env: Mapping[str, str]  # the complete environment of the process
    working_dir: str | None  # None: the current directory
    grace_period_s: float  # between SIGTERM and SIGKILL
    directories: tuple[str, ...]  # emptyDir stand-ins to create before the start


@dataclass(frozen=True)
class LocalPlan:
    processes: tuple[LocalProcess, ...]
    notes: tuple[str, ...]  # what differs from a cluster run, worth a line
    warnings: tuple[str, ...]  # what may make the run behave unlike the cluster's


def plan_local(
    job: Job, desired: DesiredState, machine: Machine, *, port: int, cpu: bool
) -> LocalPlan:
    """The processes that run `desired.pods` here; raises LocalPlanError naming the fix.

    `port` is a free local port (rank 0's store or the rendezvous); `cpu` runs a GPU job
    on CPU processes.
    """
    notes: list[str] = []
    warnings: list[str] = []
    replicas = len(desired.pods)
    devices = device_slices(job, desired, machine, cpu, notes)
    overrides = _overrides(job, replicas, port, cpu, notes)
    threads = _threads_per_process(job, machine, notes)
    processes = tuple(
        _process(job, pod, i, machine, overrides, devices[i], threads, notes, warnings)
        for i, pod in enumerate(desired.pods)
    )
    return LocalPlan(processes, tuple(dict.fromkeys(notes)), tuple(dict.fromkeys(warnings)))


def _overrides(job: Job, replicas: int, port: int, cpu: bool, notes: list[str]) -> dict[str, str]:
    """New values of operator variables that name cluster addresses (the user cannot set
    these names, so replacing them by name touches nothing of the user's)."""
    values = {
        "MASTER_ADDR": LOCALHOST,
        "PET_MASTER_ADDR": LOCALHOST,
        "MASTER_PORT": str(port),
        "PET_MASTER_PORT": str(port),
        "PET_RDZV_ENDPOINT": f"{LOCALHOST}:{port}",
        # A downward-API field in the cluster (the pod IP).
        "PET_LOCAL_ADDR": LOCALHOST,
    }
    where = "rendezvous" if job.spec.mode is Mode.ELASTIC else "rank 0"
    notes.append(
        f"{where} at {LOCALHOST}:{port} (free port picked now; spec.masterPort "
        f"{job.spec.master_port} in a cluster)"
    )
    if cpu and job.spec.uses_gpus:
        values["MGJ_BACKEND"] = "gloo"
    policy = job.spec.elastic
    if job.spec.mode is Mode.ELASTIC and policy is not None:
        # Every local pod starts at once; with the planned range c10d would wait
        # last_call_timeout for more pods that never come.
        values["PET_NNODES"] = f"{replicas}:{replicas}"
        notes.append(
            f"Elastic: PET_NNODES {policy.min_replicas}:{policy.max_replicas} is "
            f"{replicas}:{replicas} locally: all {replicas} pods start together, so the "
            "rendezvous need not wait for more"
        )
    return values


def _threads_per_process(job: Job, machine: Machine, notes: list[str]) -> int | None:
    """OMP_NUM_THREADS when the user did not choose one: in a cluster each pod has its
    own CPUs; here every process of the job shares this machine's."""
    if "OMP_NUM_THREADS" in machine.environ:
        return None
    processes = job.spec.world_size
    threads = max(1, machine.cpus // processes)
    notes.append(
        f"OMP_NUM_THREADS={threads}: {processes} processes share {machine.cpus} CPUs "
        "(set OMP_NUM_THREADS to choose)"
    )
    return threads


def _process(
    job: Job,
    pod: Mapping[str, Any],
    index: int,
    machine: Machine,
    overrides: Mapping[str, str],
    devices: str,
    threads: int | None,
    notes: list[str],
    warnings: list[str],
) -> LocalProcess:
    name = str(pod["metadata"]["name"])
    spec = pod.get("spec", {})
    containers = spec.get("containers", [])
    container = containers[trainer_index(containers)]
    cname = str(container.get("name", ""))
    where = f"{CONTAINERS}[{cname}]"
    for source in container.get("envFrom", []) or []:
        kind = next((k for k in source if k != "prefix"), "envFrom")
        ref: Mapping[str, Any] = source.get(kind) or {}
        raise LocalPlanError(
            f"{where}.envFrom: variables from {kind} {ref.get('name', '?')!r} cannot be read "
            "by a local run; list the ones the job needs under env with `value`"
        )
    dropped = _defaults_dropped(job)
    env_list = [
        {"name": var["name"], "value": overrides[var["name"]]} if var["name"] in overrides else var
        for var in container.get("env", []) or []
        if var["name"] not in dropped
    ]
    pod_env = resolve_env(
        env_list, pod, pod_uid=f"{job.ref.uid}-{index}", node=machine.hostname, where=where
    )
    mounts = volume_dirs(spec, container, name, machine.scratch_dir, notes, warnings)
    pod_env = {key: rebase(val, mounts) for key, val in pod_env.items()}

    command = [str(c) for c in container.get("command", []) or []]
    if not command:
        raise LocalPlanError(
            f"{where}.command: is not set, so the image's entrypoint would run; a local run "
            'has no image: set the command (e.g. ["python", "train.py"])'
        )
    args = [str(a) for a in container.get("args", []) or []]
    argv = tuple(rebase(expand(part, pod_env), mounts) for part in [*command, *args])
    if "CUDA_VISIBLE_DEVICES" in pod_env:
        warnings.append(
            f"{where}.env[CUDA_VISIBLE_DEVICES] is replaced by the pod's own GPUs locally"
        )
    working_dir = container.get("workingDir")
    _note_what_is_not_run(job, spec, container, machine, notes, warnings)
    return LocalProcess(
        pod=name,
        index=index,
        container=cname,
        argv=argv,
        env=_process_env(machine, pod_env, devices, threads),
        working_dir=rebase(str(working_dir), mounts) if working_dir else None,
        grace_period_s=float(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_PERIOD_S)),
        directories=tuple(mounts.values()),
    )


def _defaults_dropped(job: Job) -> set[str]:
    """The operator's defaulted variables the user did not set: not set locally, where
    every pod shares one host (its metrics port would be taken by the first pod)."""
    spec = job.spec.template.get("spec", {}) or {}
    containers = spec.get("containers", []) or []
    user = containers[trainer_index(containers)].get("env", []) if containers else []
    named = {var.get("name") for var in user or []}
    return {var["name"] for var in defaulted_env() if var["name"] not in named}


def _process_env(
    machine: Machine, pod_env: Mapping[str, str], devices: str, threads: int | None
) -> dict[str, str]:
    env = {
        key: val
        for key, val in machine.environ.items()
        if key not in _CLUSTER_ONLY_VARS and not key.startswith(_CLUSTER_ONLY_PREFIXES)
    }
    path = pod_env.get("PATH", machine.environ.get("PATH", ""))
    env.update(pod_env)
    # `python` and `torchrun` are the current environment's, e.g. the repository's .venv.
    env["PATH"] = f"{machine.python_bin_dir}:{path}" if path else machine.python_bin_dir
    env["CUDA_VISIBLE_DEVICES"] = devices
    if not devices:
        # A pod given no GPU says so as the operator's CPU pods do, so that code checking
        # the job's GPU count (MGJ_GPUS_PER_REPLICA) knows a --cpu run is on purpose.
        env["NVIDIA_VISIBLE_DEVICES"] = "void"
    if threads is not None and "OMP_NUM_THREADS" not in env:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def _note_what_is_not_run(
    job: Job,
    spec: Mapping[str, Any],
    trainer: Mapping[str, Any],
    machine: Machine,
    notes: list[str],
    warnings: list[str],
) -> None:
    image = trainer.get("image", "?")
    notes.append(
        f"{job.ref.name}: the training container's command runs with this machine's Python "
        f"({machine.python_bin_dir}), not in image {image}"
    )
    others = [c for c in spec.get("containers", []) if c is not trainer]
    for kind, containers in (("container", others), ("init container", spec.get("initContainers"))):
        for container in containers or []:
            warnings.append(
                f"{kind} {container.get('name', '?')!r} is not run locally: "
                "only the training container is"
            )
