"""The DataLoaders of a training: this rank's training batches, their sampler, and its
test batches.

Ranks that hold the whole model (or a whole model's shards) share the data out: each
reads a disjoint share (a process alone reads all of it). The stages of a pipeline
across ranks all read every batch in the same order, and whole batches only: the
schedule fixes micro-batch shapes at its first step.
"""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset, Subset

from multigpu_train.config import TrainConfig
from multigpu_train.data import Data
from multigpu_train.sampling import ResumableSampler
from multigpu_train.world import World

Batch = tuple[torch.Tensor, ...]
Loader = DataLoader[Batch]


def make(
    data: Data, cfg: TrainConfig, world: World, seed: int, *, split_model: bool, pinned: bool
) -> tuple[Loader, ResumableSampler, Loader]:
    """``pinned``: page-locked batches, for copies to a GPU."""
    readers, reader = (1, 0) if split_model else (world.world_size, world.rank)
    # Shuffled by (seed, epoch) alone: the same order on every stage and after a resume.
    sampler = ResumableSampler(data.train, readers, reader, seed)  # type: ignore[arg-type]
    # Every reader scores a disjoint share of the test split; the counts are summed.
    test_share = Subset(data.test, range(reader, len(data.test), readers))  # type: ignore[arg-type]
    return (
        _loader(cfg, data.train, sampler, drop_last=split_model, pinned=pinned),
        sampler,
        _loader(cfg, test_share, None, drop_last=split_model, pinned=pinned),
    )


def _loader(
    cfg: TrainConfig,
    dataset: Dataset[Batch],
    sampler: ResumableSampler | None,
    *,
    drop_last: bool,
    pinned: bool,
) -> Loader:
    return DataLoader(
        dataset,
        batch_size=cfg.batch_size,
        sampler=sampler,
        drop_last=drop_last,
        num_workers=cfg.data_workers,
        pin_memory=pinned,
        # Workers start once, not every epoch.
        persistent_workers=cfg.data_workers > 0,
    )
