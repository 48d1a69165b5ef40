"""What the machine is: its GPUs as the driver and torch see them, and the versions."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

import torch

NVIDIA_SMI_FIELDS = "index,name,driver_version,compute_cap,mig.mode.current,memory.total"


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    driver: str
    compute_capability: str
    mig_mode: str
    memory: str


def parse_nvidia_smi(csv: str) -> list[Gpu]:
    """Rows of ``nvidia-smi --query-gpu=NVIDIA_SMI_FIELDS --format=csv,noheader``."""
    gpus = []
    for line in csv.strip().splitlines():
        index, name, driver, capability, mig, memory = (f.strip() for f in line.split(","))
        gpus.append(Gpu(int(index), name, driver, capability, mig, memory))
    return gpus


def nvidia_smi() -> list[Gpu] | str:
    """The GPUs as the driver lists them, or why that could not be read."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return "nvidia-smi not found"
    command = [binary, f"--query-gpu={NVIDIA_SMI_FIELDS}", "--format=csv,noheader"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"nvidia-smi failed: {err}"
    if done.returncode != 0:
        return f"nvidia-smi failed: {(done.stderr or done.stdout).strip()[:200]}"
    try:
        return parse_nvidia_smi(done.stdout)
    except ValueError:
        return f"nvidia-smi printed what this script cannot read: {done.stdout[:200]!r}"


def versions() -> str:
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None  # type: ignore[no-untyped-call]
    nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None  # type: ignore[no-untyped-call]
    return (
        f"torch {torch.__version__}; CUDA {torch.version.cuda or 'none (CPU-only build)'}; "
        f"cuDNN {_cudnn_text(cudnn)}; NCCL {'.'.join(map(str, nccl)) if nccl else 'not loaded'}"
    )


def _cudnn_text(version: int | None) -> str:
    """cuDNN 9 reports 91002 for 9.10.2."""
    if version is None:
        return "none"
    major, rest = divmod(version, 10000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def describe(gpus: list[Gpu] | str) -> list[str]:
    """Lines about the GPUs as the driver lists them (all of the node's, by physical
    index) and as torch sees them (those CUDA_VISIBLE_DEVICES leaves, renumbered)."""
    lines = [versions()]
    if isinstance(gpus, str):
        lines.append(f"driver: unknown ({gpus})")
    for gpu in gpus if isinstance(gpus, list) else []:
        lines.append(
            f"driver {gpu.driver}: GPU {gpu.index} {gpu.name}, compute capability "
            f"{gpu.compute_capability}, MIG {gpu.mig_mode}, {gpu.memory}"
        )
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        lines.append(
            f"torch: cuda:{i} {props.name}, compute capability {props.major}.{props.minor}, "
            f"{props.total_memory / 2**30:.0f} GiB"
        )
    if isinstance(gpus, list) and any(g.mig_mode.lower() == "enabled" for g in gpus):
        lines.append(
            "MIG is enabled: a process sees one MIG device, so each process of a "
            "multi-GPU mode needs its own, and NCCL cannot span MIG devices"
        )
    return lines
