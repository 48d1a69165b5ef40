"""Checkpoints are written whole or not at all, by rank 0 only, and leave no temporary files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from multigpu_train import checkpoint


def state(epoch: int) -> dict[str, Any]:
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    return checkpoint.make_state(
        epoch=epoch,
        model=model.state_dict(),
        optimizer=optimizer.state_dict(),
        seed=7,
        world_size=2,
    )


def test_round_trip(tmp_path: Path) -> None:
    assert checkpoint.load(tmp_path) is None
    written = state(3)
    checkpoint.save(tmp_path, written)
    loaded = checkpoint.load(tmp_path)
    assert loaded is not None
    assert loaded["epoch"] == 3
    assert loaded["sampler"] == {"seed": 7, "epoch": 3}
    torch.testing.assert_close(loaded["model"]["weight"], written["model"]["weight"])
    # The optimizer state loads back into a fresh optimizer (Adam's moments included).
    model = torch.nn.Linear(3, 2)
    torch.optim.Adam(model.parameters()).load_state_dict(loaded["optimizer"])
    assert [p.name for p in tmp_path.iterdir()] == [checkpoint.FILENAME]


def test_crash_while_writing_keeps_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint.save(tmp_path, state(1))
    real_save = torch.save

    def crash_halfway(obj: object, f: Any) -> None:
        real_save(obj, f)
        f.truncate(10)  # a torn write
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash_halfway)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(tmp_path, state(2))
    monkeypatch.undo()
    loaded = checkpoint.load(tmp_path)
    assert loaded is not None
    assert loaded["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == [checkpoint.FILENAME]


def test_only_rank_zero_writes(tmp_path: Path) -> None:
    for rank in (1, 2, 3):
        assert checkpoint.save_on_rank0(rank, tmp_path / str(rank), state(1)) is None
        assert not (tmp_path / str(rank)).exists()
    assert checkpoint.save_on_rank0(0, tmp_path / "0", state(1)) is not None
    assert (tmp_path / "0" / checkpoint.FILENAME).is_file()
    # No directory configured: nothing to write, even on rank 0.
    assert checkpoint.save_on_rank0(0, None, state(1)) is None


def test_load_refuses_code_in_a_checkpoint(tmp_path: Path) -> None:
    torch.save({"epoch": 1, "model": {}, "hook": Path("/")}, tmp_path / checkpoint.FILENAME)
    with pytest.raises(Exception, match="Weights only load failed"):
        checkpoint.load(tmp_path)


def test_a_save_removes_what_writes_killed_midway_left(tmp_path: Path) -> None:
    """A process killed mid-write cannot remove its temporary file: the next save does."""
    checkpoint.save(tmp_path, state(1))
    for pid in (123, 456):
        (tmp_path / f".{checkpoint.FILENAME}.{pid}.tmp").write_bytes(b"torn")
    assert len(checkpoint.leftovers(tmp_path)) == 2
    checkpoint.save(tmp_path, state(2))
    assert [p.name for p in tmp_path.iterdir()] == [checkpoint.FILENAME]
