"""Which figures a check measures on its devices, which it skips and why, and their text."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from multigpu_train.gpu_check import measure, runs

if TYPE_CHECKING:
    from multigpu_train.gpu_check.report import Report

NEEDS_TWO = "needs 2 or more GPUs (one GPU cannot host two NCCL ranks)"


def precision_of(target: runs.Target) -> str:
    """bf16 where every device computes in it; else fp16 (bf16 would be emulated, and
    its FLOPs utilisation would measure the emulation)."""
    return "bf16" if target.bf16 else "fp16"


def labels(target: runs.Target) -> list[str]:
    unit, units = (
        ("GPU", "GPUs") if target.device_type == "cuda" else ("CPU process", "CPU processes")
    )
    precision = precision_of(target)
    found = [f"ratio DDP on 1 {unit} / plain loop, {precision}"]
    if target.count >= 2:
        found += [f"ratio DataParallel / DDP, {target.count} {units}", "all-reduce bus bandwidth"]
    return [*found, f"MFU transformer, {precision}"]


def skipped(target: runs.Target) -> list[tuple[str, str]]:
    """What this machine cannot measure or run, with the reason."""
    if target.count >= 2:
        return []
    return [
        (name, NEEDS_TWO)
        for name in (
            "DDP across GPUs",
            "pipeline across ranks (1F1B; fp16 with checkpoints)",
            "DataParallel / DDP ratio",
            "NCCL all-reduce bus bandwidth",
        )
    ]


def measure_all(report: Report, target: runs.Target, peak_given: float) -> None:
    cuda = target.device_type == "cuda"
    sizes = measure.GPU_SIZES if cuda else measure.CPU_SIZES
    first = torch.device("cuda", 0) if cuda else torch.device("cpu")
    precision = precision_of(target)
    names = iter(labels(target))

    def ddp_overhead() -> str:
        plain, with_ddp = measure.ddp_against_plain(
            sizes, first, "nccl" if cuda else "gloo", precision
        )
        ratio = with_ddp / plain
        goal = "met" if ratio >= measure.DDP_GOAL else "NOT met"
        return (
            f"{ratio:.3f} (goal >= {measure.DDP_GOAL}: {goal}; {with_ddp:.1f} vs "
            f"{plain:.1f} samples/s, the MFU model)"
        )

    report.figure(next(names), ddp_overhead)
    if target.count >= 2:
        per_rank: list[measure.RankFigures] = []

        def data_parallel_against_ddp() -> str:
            per_rank.extend(measure.ddp_on_every_device(sizes, target.device_type, target.count))
            ddp_rate = min(r.samples_per_second for r in per_rank) * target.count
            dp_rate = measure.data_parallel(sizes, target.device_type, target.count)
            return f"{dp_rate / ddp_rate:.3f} ({dp_rate:.0f} vs {ddp_rate:.0f} samples/s)"

        def bus_bandwidth() -> str:
            if not per_rank:
                raise RuntimeError("the DDP processes did not run")
            slowest = min(r.bus_bytes_per_second for r in per_rank)
            size = sizes.allreduce_bytes / 2**20
            backend = "NCCL" if cuda else "gloo"
            return f"{slowest / 1e9:.1f} GB/s ({backend}, {target.count} ranks, {size:.0f} MiB)"

        report.figure(next(names), data_parallel_against_ddp)
        report.figure(next(names), bus_bandwidth)

    def flops_utilisation() -> str:
        achieved, per_step = measure.model_flops_utilisation(sizes, first, precision)
        name = torch.cuda.get_device_name(first) if cuda else "CPU"
        peak = peak_given or (measure.peak_tflops(name) if cuda else None)
        measured = f"{achieved:.3g} TFLOP/s ({per_step / 1e9:.3g} GFLOP per step)"
        if peak is None:
            return f"{measured}; no peak known for {name!r}: pass --peak-tflops"
        return f"{100 * achieved / peak:.1f} % of {peak:g} TFLOP/s ({name}); {measured}"

    report.figure(next(names), flops_utilisation)
