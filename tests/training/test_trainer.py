"""A Trainer's checkpoint state (its CheckpointManager): the format, and loading it
into every model layout."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from multigpu_train import dist_pipeline
from multigpu_train.config import TrainConfig
from multigpu_train.metrics import TrainerMetrics
from multigpu_train.steps import ForwardBackward, RankStage
from multigpu_train.trainer import Run, Trainer
from multigpu_train.world import read_world
from training.workers.batch import digits_batch, model

CPU = torch.device("cpu")


class StageOnly(ForwardBackward):
    """A pipeline stage's place, without the schedule: loading a checkpoint needs no more."""

    def __init__(self, stage: nn.Module, rank_stage: RankStage) -> None:
        super().__init__(stage)
        self.rank_stage = rank_stage


def trainer(net: nn.Module, step: ForwardBackward | None = None, seed: int = 0) -> Trainer:
    run = Run(TrainConfig(seed=seed), read_world({}), CPU, TrainerMetrics("test", 0))
    return Trainer(run, net, step or ForwardBackward(net))


def trained(seed: int = 0) -> Trainer:
    """A trainer after one epoch of two batches: Adam has moments to save."""
    t = trainer(model(), seed=seed)
    x, y = digits_batch(32)
    t.run_epoch(list(zip(x.chunk(2), y.chunk(2), strict=True)))
    t.epoch = 1
    return t


def test_state_dict_is_the_checkpoint_format() -> None:
    t = trained(seed=5)
    state = t.checkpoints.state_dict()
    assert state is not None
    assert set(state) == {
        "epoch", "step", "model", "optimizer", "sampler", "world_size", "saved_at"
    }  # fmt: skip
    # Two batches, two optimizer steps.
    assert (state["epoch"], state["step"], state["sampler"], state["world_size"]) == (
        1,
        2,
        {"seed": 5, "epoch": 1},
        1,
    )
    assert state["model"].keys() == t.model.state_dict().keys()
    assert state["optimizer"]["state"], "Adam's moments are saved"


def test_round_trip_restores_weights_optimizer_epoch_and_seed() -> None:
    saved = trained(seed=5).checkpoints.state_dict()
    assert saved is not None
    fresh = trainer(model(), seed=0)
    fresh.checkpoints.load_state_dict(saved)
    assert (fresh.epoch, fresh.seed, fresh.count.done) == (1, 5, 2)
    for name, value in fresh.model.state_dict().items():
        torch.testing.assert_close(value, saved["model"][name])
    again = fresh.checkpoints.state_dict()
    assert again is not None
    torch.testing.assert_close(again["optimizer"], saved["optimizer"])


def old_checkpoint(net: nn.Module, optimizer: Any) -> dict[str, Any]:
    """A checkpoint as the entrypoints wrote it before the Trainer existed (dicts only)."""
    return {
        "epoch": 3,
        "model": net.state_dict(),
        "optimizer": optimizer,
        "sampler": {"seed": 7, "epoch": 3},
        "world_size": 2,
        "saved_at": 1234.0,
    }


def test_a_checkpoint_written_before_loads() -> None:
    source = trained()
    fresh = trainer(model())
    fresh.checkpoints.load_state_dict(old_checkpoint(source.model, source.optimizer.state_dict()))
    assert (fresh.epoch, fresh.seed) == (3, 7)
    for name, value in fresh.model.state_dict().items():
        torch.testing.assert_close(value, source.model.state_dict()[name])
    assert (
        fresh.optimizer.state_dict()["state"].keys()
        == source.optimizer.state_dict()["state"].keys()
    )


def test_pipeline_checkpoint_loads_into_a_whole_model_with_a_fresh_optimizer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = trained()
    per_stage = [source.optimizer.state_dict()] * 2
    fresh = trainer(model())
    with caplog.at_level(logging.WARNING):
        fresh.checkpoints.load_state_dict(old_checkpoint(source.model, per_stage))
    assert "does not match a whole model; starting it afresh" in caplog.text
    assert not fresh.optimizer.state_dict()["state"]
    for name, value in fresh.model.state_dict().items():
        torch.testing.assert_close(value, source.model.state_dict()[name])


def test_a_stage_loads_its_share_of_a_whole_model_checkpoint(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = trained()
    stage = dist_pipeline.own_stage(model(), 1, 2, CPU)
    stage_optimizer = torch.optim.Adam(stage.parameters()).state_dict()
    fresh = trainer(stage, StageOnly(stage, RankStage(1, 2)))
    fresh.checkpoints.load_state_dict(
        old_checkpoint(source.model, [{"unused": 0}, stage_optimizer])
    )
    whole = source.model.state_dict()
    assert stage.state_dict().keys() < whole.keys()
    for name, value in stage.state_dict().items():
        torch.testing.assert_close(value, whole[name])
    assert not caplog.text
    # A whole-model optimizer state does not fit a stage: it starts afresh.
    with caplog.at_level(logging.WARNING):
        fresh.checkpoints.load_state_dict(
            old_checkpoint(source.model, source.optimizer.state_dict())
        )
    assert "does not match 2 stages; starting it afresh" in caplog.text


def test_an_unsharded_run_refuses_a_directory_of_sharded_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "step-000000004").mkdir()
    (tmp_path / "latest").write_text("step-000000004\n")
    run = Run(TrainConfig(checkpoint_dir=tmp_path), read_world({}), CPU, TrainerMetrics("test", 0))
    net = model()
    with pytest.raises(RuntimeError, match="holds sharded checkpoints"):
        Trainer(run, net, ForwardBackward(net)).checkpoints.resume()
