"""DistributedDataParallel: one process per GPU (or one on the CPU), any number of pods.

Run as ``python -m multigpu_train.ddp`` (the operator's RANK/WORLD_SIZE/MASTER_*) or
``torchrun -m multigpu_train.ddp`` (fixed or elastic). After a restart or a change of
membership it resumes from the latest checkpoint.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler, Subset

from multigpu_train import distributed, fit, models
from multigpu_train.config import TrainConfig
from multigpu_train.startup import start


def wrap(model: torch.nn.Module, device: torch.device, cfg: TrainConfig) -> DistributedDataParallel:
    """DDP with the knobs from the flags; the model must already be on ``device``."""
    return DistributedDataParallel(
        model,
        device_ids=[device] if device.type == "cuda" else None,
        bucket_cap_mb=cfg.bucket_cap_mb,
        gradient_as_bucket_view=cfg.gradient_as_bucket_view,
        find_unused_parameters=cfg.find_unused_parameters,
    )


def train(argv: Sequence[str] | None = None) -> float:
    s = start(argv, ("ddp",), "multigpu_train.ddp")
    cfg, world = s.cfg, s.world
    distributed.init_process_group(world, s.backend, s.device, cfg.init_timeout)
    try:
        model = models.build(cfg, s.data.sample_shape, s.data.classes).to(s.device)
        ddp_model = wrap(model, s.device, cfg)
        optimizer = torch.optim.Adam(ddp_model.parameters(), lr=cfg.lr)
        run = fit.Run(cfg, world, s.device, s.metrics)
        sampler: DistributedSampler[int] = DistributedSampler(
            s.data.train, num_replicas=world.world_size, rank=world.rank, shuffle=True
        )
        # Every rank scores a disjoint share of the test split; the counts are summed.
        test_share = Subset(s.data.test, range(world.rank, len(s.data.test), world.world_size))  # type: ignore[arg-type]
        return fit.fit(
            run,
            ddp_model,
            model,
            optimizer,
            fit.loader(run, s.data.train, sampler),
            sampler,
            fit.loader(run, test_share, None),
            no_sync=ddp_model.no_sync if cfg.grad_accum_steps > 1 else None,
            # The inner module: a DDP forward could start collectives while scoring.
            eval_model=model,
        )
    finally:
        distributed.destroy_process_group()


@record
def main() -> None:
    train(sys.argv[1:])
    distributed.exit_after_success()


if __name__ == "__main__":
    main()
