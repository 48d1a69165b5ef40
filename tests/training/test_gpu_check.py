"""`make gpu-check` on a machine without a GPU, and the parts of it that need none.

The checks themselves need GPUs; what runs here is the path a machine without one takes,
the arithmetic of the figures, and the measurements on CPU stand-ins for two GPUs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from multigpu_train import devices, driver
from multigpu_train.errors import SetupError
from multigpu_train.gpu_check import decoder, figures, machine, measure, reshard, runs
from multigpu_train.gpu_check.report import Report
from training import procs


def test_without_a_gpu_it_prints_its_plan_says_so_and_exits_2(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "multigpu_train.gpu_check", "--report", str(report)],
        env=procs.clean_env({"CUDA_VISIBLE_DEVICES": ""}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "gpu-check: no GPU: no CUDA GPU is visible" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert f"plan: torch {torch.__version__}" in done.stdout
    assert "plan: devices: no CUDA GPU visible" in done.stdout
    written = json.loads(report.read_text())
    assert written["exit_status"] == 2
    assert written["entries"][-1]["kind"] == "error"


def test_make_gpu_check_uses_an_installed_torch_without_a_download() -> None:
    """The Makefile target runs the package from the source tree with the first python
    that imports torch: no venv is made, nothing is downloaded."""
    done = subprocess.run(
        ["make", "--no-print-directory", "gpu-check", f"GPU_CHECK_PYTHON={sys.executable}"],
        cwd=procs.TESTS_DIR.parent,
        env=procs.clean_env({"CUDA_VISIBLE_DEVICES": "", "PIP_NO_INDEX": "1"}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"gpu-check: {sys.executable} with torch from {torch.__version__}" in done.stdout
    assert "plan: multigpu_train from" in done.stdout
    assert "no GPU" in done.stderr
    assert "pip" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("driver_version", "cuda", "expected"),
    [
        ("580.65.06", "13.0", None),
        ("575.51.03", "13.0", "needs driver >= 580: use the CUDA 12 variant"),
        ("535.247.01", "13.0", "needs driver >= 580: use the CUDA 12 variant"),
        ("535.247.01", "12.6", None),
        ("525.60.13", "12.8", None),
        ("470.256.02", "12.6", "needs driver >= 525: no trainer image runs on it"),
        ("470.256.02", "13.0", "needs driver >= 580: no trainer image runs on it"),
        # No driver, or a CPU-only torch: "no GPU", not "too old".
        (None, "13.0", None),
        ("470.256.02", None, None),
    ],
)
def test_a_driver_too_old_for_the_torch_build(
    driver_version: str | None, cuda: str | None, expected: str | None
) -> None:
    found = driver.too_old(driver_version, cuda)
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert expected in found
        assert f"the NVIDIA driver {driver_version} is too old" in found


@pytest.mark.parametrize(
    "text",
    [
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 06:55:00 UTC 2025",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build",
    ],
)
def test_driver_version_from_the_kernel_module(text: str) -> None:
    assert driver.parse_proc_version(text + "\nGCC version: gcc 12\n") == "580.65.06"


def test_the_trainers_start_up_error_names_a_too_old_driver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(driver, "installed_version", lambda: "535.247.01")
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    with pytest.raises(SetupError, match=r"MGJ_GPUS_PER_REPLICA=1 but the NVIDIA driver 535"):
        devices.select_devices("auto", {"MGJ_GPUS_PER_REPLICA": "1"}, cuda_count=0)


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
        ("NVIDIA H100 NVL", 835.0),
        ("NVIDIA H200", 989.0),
        ("NVIDIA H200 NVL", 835.0),
        ("NVIDIA GB200", 2500.0),
        ("NVIDIA B200", 2250.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA A10G", 70.0),
        ("NVIDIA L40S", 362.0),
        ("NVIDIA L40", 181.0),
        ("NVIDIA L4", 121.0),
        ("Tesla T4", 65.0),
        ("Tesla V100-SXM2-16GB", 125.0),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", None),
    ],
)
def test_peak_of_a_card_by_its_exact_name(name: str, peak: float | None) -> None:
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
        "DDP, 2 data-loader workers, pinned memory",
        "DataParallel over 1 device(s)",
        "DataParallel over 1 device(s), fp16 autocast",
        "pipeline in one process, 2 stages",
        "FSDP2 under torchrun, 1 process(es)",
        "FSDP2, activation checkpointing and torch.compile per block",
    ]
    # No bf16: the sharded runs train in fp32 (fp16 is refused with sharding).
    sharded = runs.technique_runs(runs.Target("cuda", 1, bf16=False))[-1].command
    assert sharded[sharded.index("--precision") + 1] == "fp32"
    eight = runs.technique_runs(runs.Target("cuda", 8, bf16=True))
    names = [r.name for r in eight]
    assert names[1] == "DDP, bf16"
    assert "DataParallel over 8 device(s), bf16 autocast" in names
    assert names[-4:] == [
        "DDP under torchrun, 8 processes",
        "FSDP2 hybrid under torchrun, 8 processes",
        "pipeline across 8 ranks, 1F1B",
        "pipeline across 8 ranks, fp16, checkpoints on",
    ]
    pipeline = eight[-2].command
    assert "--nproc-per-node=8" in pipeline
    assert pipeline[pipeline.index("--micro-batches") + 1] == "8"
    assert int(pipeline[pipeline.index("--batch-size") + 1]) % 8 == 0
    assert eight[-1].checkpoints
    assert "fp16" in eight[-1].command


def test_one_gpu_says_what_it_skips_and_why() -> None:
    one = runs.Target("cuda", 1, bf16=True)
    assert figures.labels(one) == [
        "ratio DDP on 1 GPU / plain loop, bf16",
        "MFU transformer, bf16",
        "MFU GPT decoder 1.1B, seq 2048, bf16",
        "MFU GPT decoder 1.1B, seq 2048, bf16, torch.compile per block",
    ]
    skipped = dict(figures.skipped(one))
    assert "NCCL all-reduce bus bandwidth" in skipped
    assert all("one GPU cannot host two NCCL ranks" in why for why in skipped.values())
    assert figures.skipped(runs.Target("cuda", 2, bf16=True)) == []
    # Before compute capability 8.0 bf16 is emulated: its utilisation would mislead.
    assert figures.labels(runs.Target("cuda", 1, bf16=False))[1] == "MFU transformer, fp16"


def test_figures_on_two_cpu_stand_ins(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report()
    threads = torch.get_num_threads()
    try:
        figures.measure_all(report, runs.Target("cpu", 2, bf16=True), peak_given=1.0)
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert report.failed == 0, out
    for label in (
        "ratio DDP on 1 CPU process / plain loop, bf16",
        "ratio DataParallel / DDP, 2 CPU processes",
        "all-reduce bus bandwidth",
        "MFU transformer, bf16",
        "MFU GPT decoder 0.12M, seq 64, bf16",
    ):
        assert label in out
    assert "(gloo, 2 ranks, 4 MiB)" in out
    assert "% of 1 TFLOP/s" in out


def test_runs_find_the_package_this_check_was_started_from() -> None:
    env = runs.child_env({"MGJ_DEVICE": "cpu"})
    source = str(Path(runs.__file__).resolve().parents[2])
    assert env["PYTHONPATH"].split(os.pathsep)[0] == source
    assert env["MGJ_DEVICE"] == "cpu"


def test_the_decoder_is_about_1b_and_its_flops_are_6n_plus_attention() -> None:
    size = decoder.GPU_DECODER
    assert 1.0e9 < decoder.parameters(size) < 1.2e9
    assert sum(p.numel() for p in decoder.Decoder(decoder.CPU_DECODER).parameters()) == (
        decoder.parameters(decoder.CPU_DECODER)
    )
    # 20 blocks of 12 x 2048^2, the tied 2048 x 32000 output; attention 12 x 20 x 2048 x 2048.
    n = 20 * 12 * 2048**2 + 2048 * 32000
    assert decoder.flops_per_token(size) == 6 * n + 12 * 20 * 2048 * 2048
    # 10,000 tokens/s on a 989 TFLOP/s card.
    assert decoder.mfu(10_000, size, 989.0) == pytest.approx(
        10_000 * (6 * n + 12 * 20 * 2048**2) / 989e12
    )


def test_the_flop_formula_counts_what_torch_counts() -> None:
    """The formula against torch's FlopCounterMode on a small decoder: attention through
    the math kernel, whose matrix products the counter sees (the fused CPU kernel is
    not counted)."""
    size = decoder.CPU_DECODER
    model = decoder.Decoder(size)
    tokens = torch.randint(0, size.vocab, (size.batch, size.seq + 1))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()  # type: ignore[no-untyped-call]
    per_token = counter.get_total_flops() / (size.batch * size.seq)
    assert per_token == decoder.flops_per_token(size)


def test_a_gpu_too_small_for_the_decoder_skips_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(figures, "gpu_memory_gib", lambda: 22.0)
    one = runs.Target("cuda", 1, bf16=True)
    assert not any("decoder" in label for label in figures.labels(one))
    skipped = dict(figures.skipped(one))
    assert skipped["MFU GPT decoder 1.1B, seq 2048, bf16"].startswith("needs about 40 GiB")


def test_the_sharded_checkpoint_run_on_two_cpu_stand_ins_resumes_on_one() -> None:
    outcome = reshard.dcp_run(runs.Target("cpu", 2, bf16=True))
    assert outcome.ok, outcome.detail
    assert outcome.name == runs.EXTRA_RUNS[2]
    assert outcome.detail == "saved by 2, resumed by 1 (resharded)"
