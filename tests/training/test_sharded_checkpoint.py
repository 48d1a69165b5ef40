"""Sharded checkpoints (DCP): a save becomes the latest only when complete, an interrupted
one is never loaded and is cleared by the next, and a checkpoint of N ranks resumes at
M (an elastic job resized) with the same weights, optimizer state and progress."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from multigpu_train import checkpoint_layout as layout
from training import procs

# --- the layout, without processes ---------------------------------------------------


def test_latest_names_the_published_step_directory_only(tmp_path: Path) -> None:
    assert layout.latest(tmp_path) is None
    assert layout.fresh_name(tmp_path, 7) == "step-000000007"
    (tmp_path / "step-000000007").mkdir()
    # Written but not published: not the latest, and a leftover.
    assert layout.latest(tmp_path) is None
    assert layout.leftovers(tmp_path) == [tmp_path / "step-000000007"]
    layout.publish(tmp_path, "step-000000007")
    assert layout.latest(tmp_path) == "step-000000007"
    assert layout.leftovers(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step-000000007"]
    # Saving again at the same step (a job resumed there) does not reuse the latest.
    assert layout.fresh_name(tmp_path, 7) == "step-000000007.1"


def test_leftovers_are_interrupted_saves_older_checkpoints_and_temporary_pointers(
    tmp_path: Path,
) -> None:
    for name in ("step-000000004", "step-000000008", "step-000000012"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__0_0.distcp").write_bytes(b"x")
    layout.publish(tmp_path, "step-000000008")
    (tmp_path / ".latest.123.tmp").write_text("step-000000012\n")
    (tmp_path / "checkpoint.pt").write_bytes(b"an unsharded run's file stays")
    removed = layout.remove_leftovers(tmp_path)
    assert [p.name for p in removed] == [".latest.123.tmp", "step-000000004", "step-000000012"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint.pt",
        "latest",
        "step-000000008",
    ]


def test_progress_round_trip(tmp_path: Path) -> None:
    progress = {"epoch": 2, "step": 9, "sampler": {"seed": 1, "epoch": 2}, "world_size": 4}
    layout.write_progress(tmp_path, progress)
    assert layout.read_progress(tmp_path) == progress


# --- real processes ------------------------------------------------------------------


def resume_run(directory: Path, out: Path, ranks: int, steps: int) -> None:
    args = [str(directory), str(out), str(steps)]
    for done in procs.run_ranks("training.workers.dcp_resume", args, ranks):
        done.check()


def assert_same_state(got: dict[str, Any], expected: dict[str, Any]) -> None:
    assert got["progress"] == expected["progress"]
    torch.testing.assert_close(got["model"], expected["model"], rtol=0, atol=0)
    torch.testing.assert_close(
        got["optimizer"]["state"], expected["optimizer"]["state"], rtol=0, atol=0
    )
    assert got["optimizer"]["param_groups"] == expected["optimizer"]["param_groups"]


def test_resume_at_another_world_size_restores_the_same_state(tmp_path: Path) -> None:
    """Saved by 2 ranks, resumed by 4 (which train and save again), resumed by 2."""
    directory, out = tmp_path / "checkpoints", tmp_path / "out"
    out.mkdir()
    resume_run(directory, out, 2, steps=2)
    resume_run(directory, out, 4, steps=2)
    resume_run(directory, out, 2, steps=0)

    def load(name: str) -> dict[str, Any]:
        state: dict[str, Any] = torch.load(out / name, weights_only=True)
        return state

    saved_by_2, saved_by_4 = load("saved-w2.pt"), load("saved-w4.pt")
    # Adam's moments and step count are there, under the parameters' names.
    assert saved_by_2["optimizer"]["state"]["3.linear1.weight"]["exp_avg"].abs().sum() > 0
    # [epoch, position, seed, step]
    assert saved_by_2["progress"] == [1, 16, 3, 2]
    assert_same_state(load("loaded-w4.pt"), saved_by_2)
    assert saved_by_4["progress"] == [2, 32, 3, 4]
    assert_same_state(load("loaded-w2.pt"), saved_by_4)
    # Only the latest checkpoint is kept: 4 ranks' shards.
    assert sorted(p.name for p in directory.iterdir()) == ["latest", "step-000000004"]
    assert sorted(p.name for p in (directory / "step-000000004").iterdir()) == [
        ".metadata",
        *[f"__{r}_0.distcp" for r in range(4)],
        "progress.json",
    ]


FLAGS = [
    "--dataset", "synthetic", "--synthetic-samples", "64", "--synthetic-shape", "1,8,8",
    "--model", "transformer", "--transformer-dim", "32", "--transformer-layers", "2",
    "--batch-size", "8", "--steps-per-epoch", "2", "--sharding", "full",
    "--checkpoint-timeout", "10",
]  # fmt: skip


def test_a_save_killed_before_publishing_never_becomes_the_latest(tmp_path: Path) -> None:
    env = [{"MGJ_CHECKPOINT_DIR": str(tmp_path), "FAIL_AT_PUBLISH": "2"}] * 2
    # Epoch 1 saves and publishes step 2; rank 0 dies saving step 4, its shards written.
    killed = procs.run_ranks(
        "training.workers.failing_publish",
        ["multigpu_train.ddp", *FLAGS, "--epochs", "3"],
        2,
        per_rank=env,
    )
    assert killed[0].returncode == 137, procs.excerpt(killed[0].output)
    assert "killed before publishing step-000000004" in killed[0].output
    # Rank 1 waited at the checkpoint barrier for a rank that never came back.
    assert killed[1].returncode != 0
    assert "did not meet after writing a checkpoint" in killed[1].output
    assert layout.latest(tmp_path) == "step-000000002"
    assert (tmp_path / "step-000000004" / ".metadata").is_file(), "the shards were written"

    again = procs.run_ranks("multigpu_train.ddp", [*FLAGS, "--epochs", "3"], 2, per_rank=env)
    for done in again:
        done.check()
        assert re.search(r"resumed from epoch 1 \(checkpoint of world size 2", done.output)
        assert re.findall(r"epoch (\d+)/3 done", done.output) == ["2", "3"]
    # The interrupted save and the checkpoint before were removed; the latest stays.
    assert layout.latest(tmp_path) == "step-000000006"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step-000000006"]
