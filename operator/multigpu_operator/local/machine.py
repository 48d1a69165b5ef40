"""This machine as a local run plans for it (pure): what it has, and which of its GPUs
each pod gets. local/host.py finds the values out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from multigpu_operator.api.spec import Job
from multigpu_operator.local.kubelet import LocalPlanError
from multigpu_operator.plan import DesiredState


@dataclass(frozen=True)
class Machine:
    """What a local run needs to know about this machine."""

    gpus: tuple[str, ...]  # usable GPU ids, as CUDA_VISIBLE_DEVICES names them
    cpus: int
    hostname: str
    python_bin_dir: str  # the running Python's bin directory: first on every PATH
    environ: Mapping[str, str]  # the environment `mgj` was started with
    scratch_dir: str  # emptyDir volumes become directories under it


def parse_visible_devices(value: str) -> tuple[str, ...]:
    """CUDA_VISIBLE_DEVICES entries as CUDA reads them: up to the first invalid one."""
    ids: list[str] = []
    for item in value.split(","):
        entry = item.strip()
        if not entry or entry.startswith("-"):
            break
        ids.append(entry)
    return tuple(ids)


def device_slices(
    job: Job, desired: DesiredState, machine: Machine, cpu: bool, notes: list[str]
) -> list[str]:
    """CUDA_VISIBLE_DEVICES of each pod: "" hides every GPU, as a CPU pod sees none."""
    replicas, gpus = len(desired.pods), job.spec.gpus_per_replica
    if gpus == 0:
        return [""] * replicas
    needed = replicas * gpus
    if cpu:
        notes.append(
            f"--cpu: {needed} GPUs ({replicas} pods x {gpus}) run as CPU processes on the gloo "
            "backend (MGJ_BACKEND=gloo, NVIDIA_VISIBLE_DEVICES=void); world size and ranks "
            "stay as planned"
        )
        return [""] * replicas
    if not machine.gpus:
        raise LocalPlanError(
            f"job {job.ref.name} needs {needed} GPUs ({replicas} pods x {gpus} "
            "spec.gpusPerReplica) and this machine has none; add --cpu to run each GPU as a "
            "CPU process with the gloo backend, or set spec.gpusPerReplica to 0"
        )
    if needed > len(machine.gpus):
        raise LocalPlanError(
            f"job {job.ref.name} needs {needed} GPUs ({replicas} pods x {gpus} "
            f"spec.gpusPerReplica) and this machine has {len(machine.gpus)} "
            f"({','.join(machine.gpus)}); lower spec.replicas or spec.gpusPerReplica, "
            "or add --cpu"
        )
    slices = [",".join(machine.gpus[i * gpus : (i + 1) * gpus]) for i in range(replicas)]
    names = [p["metadata"]["name"] for p in desired.pods]
    shown = "; ".join(f"{n}: {s}" for n, s in zip(names, slices, strict=True))
    notes.append(f"GPUs (CUDA_VISIBLE_DEVICES): {shown}")
    return slices
