"""The first steps of every entrypoint: flags, the launch contract, device, data, metrics.

All checks run before the process group is joined, so a bad set-up fails on every
rank with its own clear message instead of leaving the others waiting.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from multigpu_train import (
    config,
    data,
    devices,
    distributed,
    logs,
    metrics,
    precision,
    shared_gpus,
)
from multigpu_train.world import World, read_world

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Started:
    cfg: config.TrainConfig
    world: World
    device: torch.device
    backend: str
    data: data.Data
    metrics: metrics.TrainerMetrics

    def join(self) -> distributed.CheckpointBarrier:
        """Join the job's process group with this run's timeouts; the checkpoint barrier's
        own group only when checkpoints are on."""
        return distributed.init_process_group(
            self.world,
            self.backend,
            self.device,
            self.cfg.init_timeout,
            self.cfg.checkpoint_timeout,
            checkpoints=self.cfg.checkpoint_dir is not None,
        )


def start(argv: Sequence[str] | None, groups: Sequence[str], prog: str) -> Started:
    environ = os.environ
    world = read_world(environ)
    logs.setup(world.rank)
    cfg = config.parse(argv, environ, groups=("common", *groups), prog=prog)
    device = devices.select_device(cfg.device, world.local_rank, environ)
    shared_gpus.check(world, device, environ)
    backend = devices.select_backend(cfg.backend, device)
    precision.check_supported(cfg.precision, device)
    precision.set_tf32(cfg.tf32, device)
    loaded = data.load(cfg)
    log.info(
        "%s: job=%s mode=%s rank=%d/%d local_rank=%d device=%s backend=%s restart=%d "
        "data=%s (%d train, %d test) model=%s precision=%s",
        prog,
        world.job_name,
        world.mode or "-",
        world.rank,
        world.world_size,
        world.local_rank,
        device,
        backend,
        world.restart_count,
        cfg.dataset,
        len(loaded.train),  # type: ignore[arg-type]
        len(loaded.test),  # type: ignore[arg-type]
        cfg.model,
        cfg.precision,
    )
    served = metrics.start(
        cfg.metrics_port,
        world.local_rank,
        world.job_name,
        world.rank,
        world.world_size,
        world.restart_count,
    )
    return Started(cfg, world, device, backend, loaded, served)
