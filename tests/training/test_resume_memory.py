"""A resume's memory per rank.

- DDP (a whole model per rank) and sharded (FSDP2): no rank holds more than one copy of
  the checkpoint in host memory while it resumes; its peak resident memory rises by at
  most RESUME_GOAL x the checkpoint's size. Before rank 0 sent the checkpoint as one
  pickled object, the rise was 4.07x on rank 0 and 4.00x on rank 1 (DDP, 2 ranks).
- A pipeline: each stage receives only its share of the checkpoint, so a rank's peak
  shrinks as the stages grow (it once received the whole checkpoint, every stage's
  optimizer state included, on every rank), and none holds more than one copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from training.resume_memory import RESUME_GOAL, ddp_flags, resume_growth_mib


@pytest.mark.parametrize("sharding", ["none", "full"])
def test_a_rank_holds_at_most_one_copy_of_the_checkpoint_at_a_resume(
    tmp_path: Path, sharding: str
) -> None:
    grown, size = resume_growth_mib(tmp_path, 2, "multigpu_train.ddp", ddp_flags(sharding))
    ratios = [g / size for g in grown]
    print(
        f"--sharding {sharding}: checkpoint {size:.1f} MiB; resume peak growth per rank "
        f"{[round(g, 1) for g in grown]} MiB = {[round(r, 2) for r in ratios]} x the checkpoint"
    )
    assert size > 50
    assert max(ratios) <= RESUME_GOAL


def test_a_stage_receives_only_its_share_at_a_resume(tmp_path: Path) -> None:
    two, size = resume_growth_mib(tmp_path / "two", 2)
    four, _ = resume_growth_mib(tmp_path / "four", 4)
    print(
        f"pipeline: checkpoint {size:.1f} MiB; resume peak growth per rank, MiB: "
        f"2 ranks {[round(g, 1) for g in two]}, 4 {[round(g, 1) for g in four]}"
    )
    assert size > 50
    # Rank 0 maps the file and sends each stage its share from there, tensor by tensor;
    # every other rank receives its weights into its stage and its optimizer state
    # (seen here: rank 0 0.7x and 0.85x the checkpoint, the others 0.35x with 2 stages
    # and 0.18x with 4; before, as pickled objects, rank 0 4.0x and 3.0x, the others
    # 2.0x and 1.0x).
    assert max(two + four) <= RESUME_GOAL * size
    # Not the whole checkpoint on every rank: the share shrinks as the stages grow.
    assert max(four[1:]) < 0.75 * max(two[1:])
