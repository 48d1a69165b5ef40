"""Mixed precision on the CPU: bf16 and fp16 autocast (fp16 with its gradient scaler)
give loss curves close to fp32's in every technique, and survive a resume.

The CPU runs both dtypes through autocast, so the code paths are those of a GPU; the
speed and the overflow behaviour of fp16 on a GPU are not measured here (make
gpu-check does that).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from multigpu_train.config import TrainConfig
from multigpu_train.local_pipeline import LocalPipeline
from multigpu_train.metrics import TrainerMetrics
from multigpu_train.precision import Precision
from multigpu_train.steps import ForwardBackward
from multigpu_train.trainer import Run, Trainer
from multigpu_train.world import read_world
from training import procs
from training.workers.batch import digits_batch, model

CPU = torch.device("cpu")
STEPS, BATCH = 20, 32
# Largest difference to fp32's loss at any step; seen: 0.02 (bf16), 0.008 (fp16).
LOSS_TOLERANCE = 0.05
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def forward_for(technique: str, net: nn.Sequential, precision: Precision) -> nn.Module:
    """The wrapped forward each entrypoint builds (on the CPU)."""
    if technique == "data-parallel":
        return nn.DataParallel(precision.wrap(net))
    if technique == "local-pipeline":
        return precision.wrap(LocalPipeline(net, [CPU, CPU], 4))
    return precision.wrap(net)


def curve(kind: str, technique: str, precision_name: str) -> tuple[list[float], torch.dtype]:
    """Per-step losses of STEPS steps, and the dtype of the logits."""
    torch.set_num_threads(1)
    net = model(kind)
    precision = Precision(precision_name, "cpu")
    forward = forward_for(technique, net, precision)
    run = Run(TrainConfig(), read_world({}), CPU, TrainerMetrics("test", 0))
    trainer = Trainer(run, net, ForwardBackward(forward, precision=precision))
    x, y = digits_batch(STEPS * BATCH)
    with torch.no_grad():
        dtype = forward(x[:2]).dtype
    losses = [trainer.run_batch(a, b) for a, b in zip(x.chunk(STEPS), y.chunk(STEPS), strict=True)]
    return [float(loss) for loss in losses if loss is not None], dtype


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize(
    ("kind", "technique"),
    [
        ("cnn", "whole"),
        ("transformer", "whole"),
        ("transformer", "data-parallel"),
        ("transformer", "local-pipeline"),
    ],
)
def test_loss_curve_follows_fp32_in_one_process(kind: str, technique: str, precision: str) -> None:
    reference, fp32 = curve(kind, technique, "fp32")
    losses, dtype = curve(kind, technique, precision)
    assert (fp32, dtype) == (torch.float32, DTYPES[precision])
    differences = [abs(a - b) for a, b in zip(losses, reference, strict=True)]
    assert max(differences) < LOSS_TOLERANCE, differences
    assert max(differences) > 0, "the lower precision changed nothing: was it used?"
    assert losses[-1] < losses[0] - 0.3


def epoch_losses(runs: list[procs.Finished]) -> list[float]:
    """The epoch losses the job logged: rank 0's, or the last stage's in a pipeline."""
    seen = [done.floats(r"epoch \d/\d done: loss=([\d.]+)") for done in runs]
    return next(losses for losses in seen if losses)


MODES = {
    "ddp": ("multigpu_train.ddp", {}),
    "pipeline": ("multigpu_train.pipeline", {"MGJ_PIPELINE_SCHEDULE": "1F1B"}),
}
FLAGS = ["--steps-per-epoch", "10"]


@pytest.mark.parametrize("mode", MODES)
def test_two_ranks_follow_fp32_and_resume_with_the_gradient_scale(
    tmp_path: Path, mode: str
) -> None:
    module, extra = MODES[mode]

    def run(precision: str, epochs: int, directory: Path | None = None) -> list[procs.Finished]:
        env = {**extra, **({"MGJ_CHECKPOINT_DIR": str(directory)} if directory else {})}
        flags = [*FLAGS, "--precision", precision, "--epochs", str(epochs)]
        return [done.check() for done in procs.run_ranks(module, flags, 2, per_rank=[env] * 2)]

    reference = epoch_losses(run("fp32", 2))
    assert len(reference) == 2
    assert epoch_losses(run("bf16", 2)) == pytest.approx(reference, abs=LOSS_TOLERANCE)

    # fp16: one epoch, then the second after a resume from the checkpoint.
    first = run("fp16", 1, tmp_path)
    saved = torch.load(tmp_path / "checkpoint.pt", weights_only=True)["grad_scaler"]
    # One growth-tracker tick per step without overflow.
    assert (saved["scale"], saved["_growth_tracker"]) == (65536.0, 10)
    second = run("fp16", 2, tmp_path)
    for done in second:
        assert "resumed from epoch 1 " in done.output
    losses = [*epoch_losses(first), *epoch_losses(second)[-1:]]
    assert losses == pytest.approx(reference, abs=LOSS_TOLERANCE)
    resumed = torch.load(tmp_path / "checkpoint.pt", weights_only=True)["grad_scaler"]
    assert resumed["_growth_tracker"] == 20, "the scaler started afresh after the resume"


def test_pipeline_stages_skip_an_overflowed_step_together(tmp_path: Path) -> None:
    for done in procs.run_ranks("training.workers.pipe_fp16", [str(tmp_path)], 2):
        done.check()
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    for rank in ranks:
        clean, overflow = rank["shared"]
        assert (clean["stepped"], clean["scale_after"]) == (True, 65536.0)
        # Rank 0's gradient overflowed: no stage steps, every scale halves.
        assert (overflow["stepped"], overflow["scale_after"]) == (False, 32768.0)
    # With a scaler per stage, rank 1 would step on and keep its scale: the stages'
    # weights and scales part ways.
    assert [r["per-rank"][1]["stepped"] for r in ranks] == [False, True]
    assert [r["per-rank"][1]["scale_after"] for r in ranks] == [32768.0, 65536.0]
