"""Model parallelism: a split model computes what the whole one does, and it trains."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from multigpu_train.local_pipeline import LocalPipeline
from training import procs
from training.workers.batch import digits_batch, model, reference_grads

BATCH = 32


# name: (schedule, micro-batches, model)
PIPELINE_CASES = {
    "gpipe-cnn": ("GPipe", 4, "cnn"),
    "1f1b-cnn": ("1F1B", 4, "cnn"),
    "1f1b-transformer": ("1F1B", 2, "transformer"),
}


@pytest.fixture(scope="module")
def pipeline_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every case's loss and gradients from one 2-rank job."""
    out = tmp_path_factory.mktemp("pipeline-grads")
    cases = [f"{n}:{s}:{m}:{k}" for n, (s, m, k) in PIPELINE_CASES.items()]
    for done in procs.run_ranks("training.workers.pipe_step", [str(out), str(BATCH), *cases], 2):
        done.check()
    return out


@pytest.mark.parametrize("case", PIPELINE_CASES)
def test_two_rank_pipeline_matches_the_unsplit_model(pipeline_results: Path, case: str) -> None:
    kind = PIPELINE_CASES[case][2]
    x, y = digits_batch(BATCH)
    expected_loss, expected = reference_grads(model(kind), x, y)
    first, last = (torch.load(pipeline_results / f"{case}-rank{r}.pt") for r in (0, 1))
    assert first["loss"] is None
    assert last["loss"] == pytest.approx(expected_loss, rel=1e-5)
    # Each stage holds a disjoint part of the model, under the whole model's names.
    assert first["grads"].keys().isdisjoint(last["grads"].keys())
    got = {**first["grads"], **last["grads"]}
    assert got.keys() == expected.keys()
    for name, grad in expected.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize(
    ("stages", "micro_batches", "kind"),
    [(2, 4, "cnn"), (3, 1, "cnn"), (4, 3, "transformer")],
)
def test_in_process_split_matches_the_unsplit_model(
    stages: int, micro_batches: int, kind: str
) -> None:
    x, y = digits_batch(BATCH)
    expected_loss, expected = reference_grads(model(kind), x, y)
    whole = model(kind)
    pipeline = LocalPipeline(whole, [torch.device("cpu")] * stages, micro_batches)
    loss, _ = reference_grads(pipeline, x, y)
    assert loss == pytest.approx(expected_loss, rel=1e-5)
    # The pipeline's parameters are the whole model's; compare under the whole names.
    by_param = {id(p): n for n, p in whole.named_parameters()}
    got_whole = {by_param[id(p)]: p.grad for p in pipeline.parameters() if p.grad is not None}
    assert got_whole.keys() == expected.keys()
    for name, grad in expected.items():
        torch.testing.assert_close(got_whole[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_in_process_pipeline_trains_on_cpu_stages() -> None:
    env = procs.clean_env({"MGJ_PIPELINE_STAGES": "2", "MGJ_MICRO_BATCHES": "4"})
    done = procs.run("multigpu_train.pipeline", ["--epochs", "3"], env).check()
    assert "2 stages on ['cpu', 'cpu'], 4 micro-batches" in done.output
    (accuracy,) = done.floats(r"final test_accuracy=([\d.]+)")
    assert accuracy >= 0.9


def test_two_rank_pipeline_trains_and_resumes(tmp_path: Path) -> None:
    per_rank = [{"MGJ_CHECKPOINT_DIR": str(tmp_path), "MGJ_PIPELINE_SCHEDULE": "1F1B"}] * 2
    runs = procs.run_ranks("multigpu_train.pipeline", ["--epochs", "3"], 2, per_rank=per_rank)
    for done in runs:
        done.check()
    (accuracy,) = runs[1].floats(r"final test_accuracy=([\d.]+)")
    assert accuracy >= 0.85
    losses = runs[1].floats(r"epoch \d/3 done: loss=([\d.]+)")
    assert len(losses) == 3
    assert losses[-1] < losses[0]
    again = procs.run_ranks("multigpu_train.pipeline", ["--epochs", "4"], 2, per_rank=per_rank)
    for done in again:
        assert "resumed from epoch 3" in done.check().output
    assert again[1].floats(r"epoch (\d)/4 done") == [4.0]


def test_four_rank_pipeline_under_torchrun_trains_the_cnn(tmp_path: Path) -> None:
    """The default CNN in 4 stages: a cut that once left a stage of a ReLU alone, whose
    empty optimizer crashed every rank."""
    args = ["--standalone", "--nproc-per-node", "4", "-m", "multigpu_train.pipeline"]
    flags = ["--epochs", "1", "--steps-per-epoch", "10", "--checkpoint-dir", str(tmp_path)]
    done = procs.run("torch.distributed.run", [*args, *flags], procs.clean_env(), 180).check()
    assert "final test_accuracy=" in done.output
    assert "checkpoint saved" in done.output
