"""python -m multigpu_train.gpu_check: the plan, the machine, every technique, the figures.

Exit status: 0 when every run and measurement worked (a ratio under its goal is
reported, not failed: one run on a shared machine is not a verdict), 1 when something
failed, 2 when there is no GPU to check, 3 when there is a GPU but its driver is too
old for this torch's CUDA (driver.py says which image variant fits it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

import multigpu_train
from multigpu_train import driver
from multigpu_train.gpu_check import figures, machine, reshard, runs
from multigpu_train.gpu_check.report import Report

REPORT_ENV = "MGJ_GPU_CHECK_REPORT"
NO_GPU, DRIVER_TOO_OLD = 2, 3


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m multigpu_train.gpu_check",
        description="Check a GPU machine: its versions, every training technique, DDP's "
        "overhead, DataParallel against DDP, FLOPs utilisation, NCCL bandwidth.",
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
        help="the card's dense bf16 (fp16 below compute capability 8.0) peak, for a card "
        "the script does not know",
    )
    parser.add_argument(
        "--report",
        type=Path,
        default=os.environ.get(REPORT_ENV) or None,
        metavar="PATH",
        help=f"also write every line and figure as JSON to PATH (default ${REPORT_ENV}); "
        "rewritten after each step, so a run cut short leaves what it did",
    )
    parser.add_argument(
        "--runs-budget",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="start no further technique run after this many seconds (each skipped one is "
        "reported); the figures are measured anyway. 0: no limit",
    )
    return parser.parse_args(argv)


def target_of(args: argparse.Namespace) -> runs.Target | None:
    if args.cpu:
        return runs.Target("cpu", args.cpu, bf16=True)
    count = torch.cuda.device_count()
    if count == 0:
        return None
    bf16 = all(torch.cuda.get_device_capability(i)[0] >= 8 for i in range(count))
    return runs.Target("cuda", count, bf16)


def plan(target: runs.Target | None, report_path: Path | None) -> list[str]:
    """What this run uses and will do, printed before anything is measured."""
    package = Path(multigpu_train.__file__).parent
    lines = [
        f"python {sys.version.split()[0]} ({sys.executable})",
        f"torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'} "
        f"({Path(torch.__file__).parent})",
        f"multigpu_train from {package}",
        f"report: {report_path or f'none (--report PATH or {REPORT_ENV})'}",
    ]
    if target is None:
        return [*lines, "devices: no CUDA GPU visible; nothing to run"]
    unit = "GPU(s)" if target.device_type == "cuda" else "CPU stand-in process(es)"
    lines.append(f"devices: {target.count} {unit}")
    lines += [f"run: {spec.name}" for spec in runs.technique_runs(target)]
    lines += [f"run: {name}" for name in runs.EXTRA_RUNS]
    lines += [f"figure: {label}" for label in figures.labels(target)]
    lines += [f"skip: {name}: {why}" for name, why in figures.skipped(target)]
    return lines


def no_gpu(report: Report) -> int:
    problem = driver.diagnose()
    if problem is not None:
        report.fail_text(f"gpu-check: GPU found but unusable: {problem}")
        report.finish(DRIVER_TOO_OLD)
        return DRIVER_TOO_OLD
    found = machine.nvidia_smi()
    hint = found if isinstance(found, str) else f"nvidia-smi lists {len(found)} GPU(s)"
    report.fail_text(
        f"gpu-check: no GPU: no CUDA GPU is visible (torch {torch.__version__}, CUDA build "
        f"{torch.version.cuda or 'none'}; {hint}). Run it on a machine with NVIDIA GPUs and "
        "their driver, or with --cpu N to try the script on the CPU."
    )
    report.finish(NO_GPU)
    return NO_GPU


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    target = target_of(args)
    report = Report(args.report)
    for line in plan(target, args.report):
        report.line("plan", line)
    if target is None:
        return no_gpu(report)
    if target.device_type == "cuda":
        for text in machine.describe(machine.nvidia_smi()):
            report.line("machine", text)
    else:
        report.line("machine", machine.versions())
        report.line(
            "machine",
            f"CPU dry run: {target.count} CPU processes stand in for GPUs; "
            "every figure below is a CPU figure",
        )
    started = time.monotonic()

    def in_budget(name: str) -> bool:
        spent = time.monotonic() - started
        if args.runs_budget and spent > args.runs_budget:
            report.skip(name, f"--runs-budget {args.runs_budget:g} s spent ({spent:.0f} s)")
            return False
        return True

    for spec in runs.technique_runs(target):
        if in_budget(spec.name):
            report.run(runs.run(spec))
    if in_budget(runs.EXTRA_RUNS[0]):
        report.run(runs.resume_run(target))
    if in_budget(runs.EXTRA_RUNS[1]):
        report.run(runs.elastic_run(target))
    if in_budget(runs.EXTRA_RUNS[2]):
        report.run(reshard.dcp_run(target))
    figures.measure_all(report, target, args.peak_tflops)
    for name, why in figures.skipped(target):
        report.skip(name, why)
    status = 1 if report.failed else 0
    report.line("result", f"gpu-check: {'all passed' if not status else f'{report.failed} FAILED'}")
    report.finish(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
