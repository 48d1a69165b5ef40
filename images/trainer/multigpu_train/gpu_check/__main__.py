"""python -m multigpu_train.gpu_check: the machine, every technique, the figures.

Exit status: 0 when every run and measurement worked (a ratio under its goal is
reported, not failed: one run on a shared machine is not a verdict), 1 when something
failed, 2 when there is no GPU to check.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence

import torch

from multigpu_train.gpu_check import machine, measure, runs


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m multigpu_train.gpu_check",
        description="Check a GPU machine: its versions, every training technique, DDP's "
        "overhead, DataParallel against DDP, bf16 FLOPs utilisation, NCCL bandwidth.",
    )
    parser.add_argument(
        "--cpu",
        type=int,
        default=0,
        metavar="N",
        help="no GPUs: N CPU processes (gloo) stand in for N GPUs, to try the script itself",
    )
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=0.0,
        help="the card's dense bf16 peak, for a card the script does not know",
    )
    return parser.parse_args(argv)


def no_gpu() -> int:
    print(
        f"gpu-check: no CUDA GPU is visible (torch {torch.__version__}, CUDA build "
        f"{torch.version.cuda or 'none'}; {_driver_hint()}). Run it on a machine with "
        "NVIDIA GPUs and their driver, or with --cpu N to try the script on the CPU.",
        file=sys.stderr,
    )
    return 2


def _driver_hint() -> str:
    found = machine.nvidia_smi()
    return found if isinstance(found, str) else f"nvidia-smi lists {len(found)} GPU(s)"


def target_of(args: argparse.Namespace) -> runs.Target | None:
    if args.cpu:
        return runs.Target("cpu", args.cpu, bf16=True)
    count = torch.cuda.device_count()
    if count == 0:
        return None
    bf16 = all(torch.cuda.get_device_capability(i)[0] >= 8 for i in range(count))
    return runs.Target("cuda", count, bf16)


def show(label: str, text: str) -> None:
    print(f"{label:<48} {text}", flush=True)


class Report:
    """Prints as it goes and remembers whether anything failed."""

    def __init__(self) -> None:
        self.failed = 0

    def run(self, outcome: runs.Outcome) -> None:
        verdict = "ok" if outcome.ok else "FAILED"
        show(f"run  {outcome.name}", f"{verdict} ({outcome.seconds:.0f} s) {outcome.detail}")
        self.failed += not outcome.ok

    def figure(self, label: str, measured: Callable[[], str]) -> None:
        try:
            show(label, measured())
        except Exception:
            show(label, "FAILED\n" + traceback.format_exc())
            self.failed += 1


def figures(report: Report, target: runs.Target, peak_given: float) -> None:
    cuda = target.device_type == "cuda"
    sizes = measure.GPU_SIZES if cuda else measure.CPU_SIZES
    first = torch.device("cuda", 0) if cuda else torch.device("cpu")
    unit, units = ("GPU", "GPUs") if cuda else ("CPU process", "CPU processes")

    def ddp_overhead() -> str:
        plain, with_ddp = measure.ddp_against_plain(sizes, first, "nccl" if cuda else "gloo")
        ratio = with_ddp / plain
        goal = "met" if ratio >= measure.DDP_GOAL else "NOT met"
        return (
            f"{ratio:.3f} (goal >= {measure.DDP_GOAL}: {goal}; {with_ddp:.0f} vs "
            f"{plain:.0f} samples/s)"
        )

    report.figure(f"ratio DDP on 1 {unit} / plain loop", ddp_overhead)
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

        report.figure(
            f"ratio DataParallel / DDP, {target.count} {units}", data_parallel_against_ddp
        )
        report.figure("all-reduce bus bandwidth", bus_bandwidth)

    def flops_utilisation() -> str:
        achieved, per_step = measure.model_flops_utilisation(sizes, first)
        name = torch.cuda.get_device_name(first) if cuda else "CPU"
        peak = peak_given or (measure.peak_tflops(name) if cuda else None)
        measured = f"{achieved:.3g} TFLOP/s ({per_step / 1e9:.3g} GFLOP per step)"
        if peak is None:
            return f"{measured}; no peak known for {name}: pass --peak-tflops"
        return f"{100 * achieved / peak:.1f} % of {peak:g} TFLOP/s; {measured}"

    report.figure("MFU transformer, bf16", flops_utilisation)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    target = target_of(args)
    if target is None:
        return no_gpu()
    if target.device_type == "cuda":
        for text in machine.describe(machine.nvidia_smi()):
            print(text)
    else:
        print(machine.versions())
        print(
            f"CPU dry run: {target.count} CPU processes stand in for GPUs; "
            "every figure below is a CPU figure"
        )
    report = Report()
    for spec in runs.technique_runs(target):
        report.run(runs.run(spec))
    report.run(runs.resume_run(target))
    figures(report, target, args.peak_tflops)
    print(f"gpu-check: {'all passed' if not report.failed else f'{report.failed} FAILED'}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
