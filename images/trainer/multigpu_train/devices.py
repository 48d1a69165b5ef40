"""Which device and process-group backend a process uses.

Pure functions of the environment and the CUDA device count, so that the checks for a
broken set-up are testable on any machine.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import torch

from multigpu_train import driver, shared_gpus
from multigpu_train.errors import SetupError

log = logging.getLogger(__name__)

# NVIDIA's container runtime hides every GPU for these values; the operator sets "void"
# on pods that ask for none (docs/env-contract.md).
NO_GPU_VALUES = ("void", "none", "")


def gpus_requested(environ: Mapping[str, str]) -> int:
    """GPUs the job asked for this pod, 0 when it asked for none or hides them all."""
    raw = environ.get("MGJ_GPUS_PER_REPLICA", "0") or "0"
    try:
        gpus = int(raw)
    except ValueError:
        raise SetupError(f"MGJ_GPUS_PER_REPLICA={raw!r} is not an integer") from None
    if environ.get("NVIDIA_VISIBLE_DEVICES", "all").strip().lower() in NO_GPU_VALUES:
        return 0
    return gpus


def _no_cuda_message(requested: int, driver_problem: str | None = None) -> str:
    asked = f"MGJ_GPUS_PER_REPLICA={requested}" if requested else "--device cuda"
    if driver_problem is not None:
        # Not "no GPU": the GPU is there, and this image's CUDA cannot use its driver.
        return f"{asked} but {driver_problem}"
    return (
        f"{asked} but no CUDA device is visible to this process "
        f"(torch {torch.__version__}, CUDA build {torch.version.cuda}): check the node's "
        "driver and device plugin, the GPU resource limit, and CUDA_VISIBLE_DEVICES; "
        "use --device cpu (MGJ_DEVICE=cpu) to train on the CPU on purpose"
    )


def select_devices(
    requested: str, environ: Mapping[str, str], cuda_count: int | None = None
) -> list[torch.device]:
    """Every device this process may use: all visible GPUs, or the CPU."""
    count = torch.cuda.device_count() if cuda_count is None else cuda_count
    if requested == "cpu":
        return [torch.device("cpu")]
    wanted = gpus_requested(environ)
    if count == 0:
        if requested == "cuda" or wanted > 0:
            raise SetupError(_no_cuda_message(wanted, driver.diagnose()))
        return [torch.device("cpu")]
    if cuda_count is None:
        shared_gpus.check_visible(count)
    return [torch.device("cuda", i) for i in range(count)]


def select_device(
    requested: str, local_rank: int, environ: Mapping[str, str], cuda_count: int | None = None
) -> torch.device:
    """The one device of a process that drives one GPU: cuda:LOCAL_RANK, or the CPU."""
    devices = select_devices(requested, environ, cuda_count)
    if devices[0].type == "cpu":
        return devices[0]
    if local_rank >= len(devices):
        raise SetupError(
            f"LOCAL_RANK={local_rank} but only {len(devices)} CUDA device(s) are visible: "
            "run at most one process per GPU (NPROC_PER_NODE <= gpusPerReplica)"
        )
    return devices[local_rank]


def select_backend(requested: str, device: torch.device) -> str:
    """gloo on the CPU, NCCL on GPUs, unless asked otherwise."""
    if requested in ("auto", ""):
        return "nccl" if device.type == "cuda" else "gloo"
    if requested == "nccl" and device.type != "cuda":
        # The contract sets MGJ_BACKEND=nccl for GPU jobs; a deliberate CPU run of such a
        # job (MGJ_DEVICE=cpu) can only use gloo.
        log.warning("MGJ_BACKEND=nccl needs CUDA; using gloo on the CPU")
        return "gloo"
    return requested


def devices_of(model: torch.nn.Module, device: torch.device) -> list[torch.device]:
    """``device`` and every device ``model``'s parameters are on (an in-pod pipeline's
    stages), the CUDA ones by index."""
    found = {device, *(p.device for p in model.parameters())}
    return sorted(found, key=lambda d: (d.type, d.index if d.index is not None else -1))


def synchronize(devices: list[torch.device]) -> None:
    """Wait until the work queued on every CUDA device in ``devices`` is done.

    CUDA kernels run asynchronously; a time taken without this measures their launch.
    CPU work is done when the call that queued it returns: nothing to wait for.
    """
    for device in devices:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
