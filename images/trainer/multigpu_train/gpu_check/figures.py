"""Which figures a check measures on its devices, which it skips and why, and their text."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from multigpu_train.gpu_check import decoder, measure, runs

if TYPE_CHECKING:
    from multigpu_train.gpu_check.report import Report

NEEDS_TWO = "needs 2 or more GPUs (one GPU cannot host two NCCL ranks)"
# The 1.1 B decoder's weights, gradients and Adam moments (fp32) are about 17 GiB, its
# bf16 activations at 4 x 2048 tokens about 20 more.
DECODER_GIB = 40
COMPILE_ON_CPU = "measured on GPUs only: inductor's C++ build takes minutes of a CPU"


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
    found.append(f"MFU transformer, {precision}")
    if decoder_skipped(target) is None:
        found += decoder_labels(target)[: 2 if target.device_type == "cuda" else 1]
    return found


def decoder_labels(target: runs.Target) -> list[str]:
    size = decoder.GPU_DECODER if target.device_type == "cuda" else decoder.CPU_DECODER
    plain = f"MFU GPT decoder {size.label}, seq {size.seq}, {precision_of(target)}"
    return [plain, f"{plain}, torch.compile per block"]


def gpu_memory_gib() -> float | None:
    """GPU 0's memory; None where torch sees no GPU (the plan of a check without one)."""
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(0).total_memory / 2**30


def decoder_skipped(target: runs.Target) -> str | None:
    """Why the decoder's MFU cannot be measured here, or None."""
    memory = gpu_memory_gib() if target.device_type == "cuda" else None
    if memory is not None and memory < DECODER_GIB:
        return f"needs about {DECODER_GIB} GiB of GPU memory, GPU 0 has {memory:.0f}"
    return None


def skipped(target: runs.Target) -> list[tuple[str, str]]:
    """What this machine cannot measure or run, with the reason."""
    found = []
    if target.count < 2:
        found = [
            (name, NEEDS_TWO)
            for name in (
                "DDP across GPUs",
                "pipeline across ranks (1F1B; fp16 with checkpoints)",
                "DataParallel / DDP ratio",
                "NCCL all-reduce bus bandwidth",
                "FSDP2 hybrid",
            )
        ]
    decoder_why = decoder_skipped(target)
    if decoder_why is not None:
        found += [(label, decoder_why) for label in decoder_labels(target)]
    elif target.device_type != "cuda":
        found.append((decoder_labels(target)[1], COMPILE_ON_CPU))
    return found


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
    if decoder_skipped(target) is not None:
        return

    def decoder_utilisation(compiled: bool) -> str:
        size = decoder.GPU_DECODER if cuda else decoder.CPU_DECODER
        rate = decoder.tokens_per_second(size, first, precision, compiled)
        name = torch.cuda.get_device_name(first) if cuda else "CPU"
        peak = peak_given or (measure.peak_tflops(name) if cuda else None)
        per_token = decoder.flops_per_token(size) / 1e9
        measured = f"{rate:.0f} tokens/s, {per_token:.3g} GFLOP per token (6N + 12 L d T)"
        if peak is None:
            return f"{measured}; no peak known for {name!r}: pass --peak-tflops"
        return (
            f"{100 * decoder.mfu(rate, size, peak):.1f} % of {peak:g} TFLOP/s ({name}); {measured}"
        )

    report.figure(next(names), lambda: decoder_utilisation(compiled=False))
    if cuda:
        report.figure(next(names), lambda: decoder_utilisation(compiled=True))
