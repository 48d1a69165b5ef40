"""Which training samples each rank reads: DistributedSampler's order, resumable mid-epoch.

An epoch has one order over all its samples, shuffled by (seed, epoch) alone: what
``DistributedSampler`` yields for a single replica. With R ranks, rank r reads the
order's positions r, r + R, r + 2R, ... (DistributedSampler's round robin), so after k
steps of B samples per rank the first k x B x R positions of the order are trained
whatever R is. A checkpoint therefore needs one number, the position, and a resumed
epoch reads the order from there on, shared round robin among the ranks present now:
the same ones (a restarted job) or another number of them (a rescaled elastic job),
which re-split what is left. From position 0 the order is exactly
DistributedSampler's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sized

from torch.utils.data import DistributedSampler


class ResumableSampler(DistributedSampler[int]):
    """DistributedSampler (shuffled, padded like it) that can start an epoch midway."""

    def __init__(self, dataset: Sized, num_replicas: int, rank: int, seed: int) -> None:
        super().__init__(
            dataset,  # type: ignore[arg-type]
            num_replicas=num_replicas,
            rank=rank,
            shuffle=True,
            seed=seed,
        )
        self.position = 0

    def set_position(self, epoch: int, position: int = 0) -> None:
        """Read ``epoch``'s order from ``position`` (samples already trained) on."""
        self.set_epoch(epoch)
        self.position = position

    def epoch_order(self) -> list[int]:
        """Every sample index of the epoch, in the order the ranks together train them."""
        whole: DistributedSampler[int] = DistributedSampler(
            self.dataset, num_replicas=1, rank=0, shuffle=True, seed=self.seed
        )
        whole.set_epoch(self.epoch)
        return list(whole)

    def _remaining(self) -> list[int]:
        left = self.epoch_order()[self.position :]
        if not left:
            return []
        # Every rank takes the same number of samples, so the last ones are padded with
        # the first, as DistributedSampler pads: at most R - 1 samples read twice.
        padding = -len(left) % self.num_replicas
        return left + (left * -(-padding // len(left)))[:padding]

    def __iter__(self) -> Iterator[int]:
        return iter(self._remaining()[self.rank :: self.num_replicas])

    def __len__(self) -> int:
        left = max(len(self.dataset) - self.position, 0)  # type: ignore[arg-type]
        return -(-left // self.num_replicas)
