"""`make gpu-check` on a machine without a GPU, and the parts of it that need none.

The checks themselves need GPUs; what runs here is the path a machine without one takes,
the arithmetic of the figures, and the measurements on CPU stand-ins for two GPUs.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from multigpu_train.gpu_check import machine, measure, runs
from multigpu_train.gpu_check.__main__ import Report, figures
from training import procs


def test_without_a_gpu_it_says_so_and_exits_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "multigpu_train.gpu_check"],
        env=procs.clean_env({"CUDA_VISIBLE_DEVICES": ""}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "gpu-check: no CUDA GPU is visible" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stdout == ""


def test_nvidia_smi_rows_are_read() -> None:
    rows = (
        "0, NVIDIA H100 80GB HBM3, 580.65.06, 9.0, Disabled, 81559 MiB\n"
        "1, NVIDIA A100-SXM4-40GB, 570.86.15, 8.0, Enabled, 40960 MiB\n"
    )
    h100, a100 = machine.parse_nvidia_smi(rows)
    assert (h100.index, h100.driver, h100.compute_capability, h100.mig_mode) == (
        0,
        "580.65.06",
        "9.0",
        "Disabled",
    )
    assert (a100.name, a100.mig_mode) == ("NVIDIA A100-SXM4-40GB", "Enabled")
    lines = machine.describe([h100, a100])
    assert any("MIG is enabled" in line for line in lines)
    assert "driver 580.65.06: GPU 0 NVIDIA H100 80GB HBM3, compute capability 9.0" in lines[1]


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", 989.0),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA A10G", 70.0),
        ("NVIDIA L40S", 362.0),
        ("NVIDIA L4", 121.0),
        ("Tesla V100-SXM2-16GB", None),
    ],
)
def test_peak_of_a_card(name: str, peak: float | None) -> None:
    assert measure.peak_tflops(name) == peak


def test_bus_bandwidth_is_nccl_tests_busbw() -> None:
    # 1 GB in 10 ms across 8 ranks: algbw 100 GB/s, busbw x 2 x 7/8.
    assert measure.bus_bandwidth(10**9, 0.01, 8) == pytest.approx(175e9)
    assert measure.bus_bandwidth(10**9, 0.01, 2) == pytest.approx(100e9)


def test_runs_follow_the_devices() -> None:
    one = [r.name for r in runs.technique_runs(runs.Target("cuda", 1, bf16=False))]
    assert one == [
        "DDP under torchrun, 1 process",
        "DDP, fp16 with its gradient scaler",
        "DataParallel over 1 device(s)",
        "pipeline in one process, 2 stages",
    ]
    four = runs.technique_runs(runs.Target("cuda", 4, bf16=True))
    names = [r.name for r in four]
    assert names[1] == "DDP, bf16"
    assert names[-2:] == ["DDP under torchrun, 4 processes", "pipeline across 4 ranks, 1F1B"]
    pipeline = four[-1].command
    assert "--nproc-per-node=4" in pipeline
    assert pipeline[pipeline.index("--micro-batches") + 1] == "4"
    assert int(pipeline[pipeline.index("--batch-size") + 1]) % 4 == 0


def test_figures_on_two_cpu_stand_ins(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report()
    threads = torch.get_num_threads()
    try:
        figures(report, runs.Target("cpu", 2, bf16=True), peak_given=1.0)
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert report.failed == 0, out
    for label in (
        "ratio DDP on 1 CPU process / plain loop",
        "ratio DataParallel / DDP, 2 CPU processes",
        "all-reduce bus bandwidth",
        "MFU transformer, bf16",
    ):
        assert label in out
    assert "(gloo, 2 ranks, 4 MiB)" in out
    assert "% of 1 TFLOP/s" in out
