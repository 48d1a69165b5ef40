"""DataParallel: one process drives every visible GPU (nn.DataParallel), or the CPU.

``--batch-size`` is the whole batch here; DataParallel splits it across the GPUs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record

from multigpu_train import devices, models
from multigpu_train.errors import SetupError, exit_on_setup_error
from multigpu_train.precision import Precision
from multigpu_train.startup import start
from multigpu_train.steps import ForwardBackward
from multigpu_train.trainer import Run, Trainer


def train(argv: Sequence[str] | None = None) -> float:
    s = start(argv, (), "multigpu_train.dp")
    if s.world.world_size > 1:
        raise SetupError(
            f"DataParallel runs one process, but WORLD_SIZE={s.world.world_size}: "
            "use multigpu_train.ddp to train across processes or pods"
        )
    cfg = s.cfg
    visible = devices.select_devices(cfg.device, os.environ)
    model = models.build(cfg, s.data.sample_shape, s.data.classes).to(visible[0])
    precision = Precision(cfg.precision, visible[0].type)
    # On the CPU DataParallel just calls the module; on GPUs it scatters each batch.
    # Autocast inside the replicas' forward: they run in threads of their own.
    device_ids = [d.index for d in visible] if visible[0].type == "cuda" else None
    data_parallel = nn.DataParallel(precision.wrap(model), device_ids=device_ids)
    step = ForwardBackward(data_parallel, precision=precision)
    return Trainer(Run(cfg, s.world, visible[0], s.metrics), model, step).train(s.data)


@record
def main() -> None:
    with exit_on_setup_error():
        train(sys.argv[1:])


if __name__ == "__main__":
    main()
