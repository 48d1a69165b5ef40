"""The sampler's position: an epoch resumed midway reads only what was not yet trained."""

from __future__ import annotations

from collections import Counter

import pytest
from torch.utils.data import DistributedSampler

from multigpu_train.sampling import ResumableSampler

SAMPLES = 96


def ranks(count: int, epoch: int = 3, position: int = 0) -> list[list[int]]:
    samplers = [ResumableSampler(range(SAMPLES), count, rank, seed=7) for rank in range(count)]
    for sampler in samplers:
        sampler.set_position(epoch, position)
    return [list(sampler) for sampler in samplers]


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_from_the_start_it_is_distributed_samplers_order(count: int) -> None:
    for rank, got in enumerate(ranks(count)):
        reference: DistributedSampler[int] = DistributedSampler(
            range(SAMPLES),  # type: ignore[arg-type]
            num_replicas=count,
            rank=rank,
            shuffle=True,
            seed=7,
        )
        reference.set_epoch(3)
        assert got == list(reference)
        assert len(got) == len(reference)


def trained(per_rank: list[list[int]], steps: int, batch: int) -> list[int]:
    return [i for indices in per_rank for i in indices[: steps * batch]]


@pytest.mark.parametrize(("before", "after"), [(2, 2), (2, 3), (3, 2), (2, 1)])
def test_a_resumed_epoch_trains_each_remaining_sample_once(before: int, after: int) -> None:
    batch, steps = 4, 5
    first = trained(ranks(before), steps, batch)
    position = before * steps * batch
    # What the ranks together trained so far is the start of the epoch's order.
    order = ResumableSampler(range(SAMPLES), 1, 0, seed=7)
    order.set_epoch(3)
    assert sorted(first) == sorted(order.epoch_order()[:position])
    rest = ranks(after, position=position)
    assert all(len(r) == len(rest[0]) for r in rest)
    counts = Counter(first + [i for r in rest for i in r])
    # Every sample trained; padding to equal shares repeats at most after - 1 of them.
    assert set(counts) == set(range(SAMPLES))
    assert sum(counts.values()) - SAMPLES == (-(SAMPLES - position)) % after


def test_length_follows_the_position() -> None:
    sampler = ResumableSampler(range(10), 3, 2, seed=0)
    assert len(sampler) == len(list(sampler)) == 4
    sampler.set_position(0, 4)
    assert len(sampler) == len(list(sampler)) == 2
    sampler.set_position(0, 10)
    assert len(sampler) == len(list(sampler)) == 0
