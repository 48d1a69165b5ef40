"""Benchmark: what does DistributedDataParallel cost, or gain, against one plain process?

Not a test: it prints figures, never asserts on them.

    .venv/bin/python tests/bench/bench_train.py                   # CPU: DDP x1 vs plain
    .venv/bin/python tests/bench/bench_train.py --world-size 2    # 2 CPU processes

Every configuration trains the same model on the same synthetic batches, already on
the device (so data loading is not measured), through the training package's own loop
(multigpu_train.trainer.Trainer.run_epoch). Printed: samples/s of a plain loop in one process,
of DDP with --world-size processes (one per GPU, or CPU processes), their ratio, and
the ratio per process (scaling efficiency). With 2 or more GPUs, also nn.DataParallel
over all of them against DDP. On one device DDP x1 shows DDP's overhead only.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.queues import SimpleQueue

import torch
from torch import nn

from multigpu_train import ddp, distributed, models
from multigpu_train.config import TrainConfig
from multigpu_train.metrics import TrainerMetrics
from multigpu_train.steps import ForwardBackward
from multigpu_train.trainer import Batch, Run, Trainer
from multigpu_train.world import World

ONE_PROCESS = World(0, 1, 0, None, None, "bench", "", 0, False)


@dataclass(frozen=True)
class Setup:
    cfg: TrainConfig
    steps: int
    warmup: int
    threads: int
    world_size: int


def parse() -> Setup:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("transformer", "cnn"), default="transformer")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--shape", default="3,32,32", help="sample shape C,H,W")
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--steps", type=int, default=30, help="measured steps")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured steps first")
    parser.add_argument("--world-size", type=int, default=0, help="DDP processes (0: GPUs or 1)")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads/process (0: cores/W)")
    args = parser.parse_args()
    cfg = TrainConfig(
        model=args.model,
        transformer_layers=args.layers,
        transformer_dim=args.dim,
        synthetic_shape=tuple(int(d) for d in args.shape.split(",")),
        batch_size=args.batch_size,
        bucket_cap_mb=args.bucket_cap_mb,
    )
    world_size = args.world_size or max(torch.cuda.device_count(), 1)
    threads = args.threads or max((os.cpu_count() or 1) // world_size, 1)
    return Setup(cfg, args.steps, args.warmup, threads, world_size)


def batches(setup: Setup, device: torch.device, batch: int) -> list[Batch]:
    gen = torch.Generator().manual_seed(0)
    shape = (batch, *setup.cfg.synthetic_shape)
    x = torch.randn(shape, generator=gen).to(device)
    y = torch.randint(0, setup.cfg.classes, (batch,), generator=gen).to(device)
    return [(x, y)] * (setup.warmup + setup.steps)


def timed(
    setup: Setup,
    model: nn.Module,
    device: torch.device,
    data: list[Batch],
    world: World = ONE_PROCESS,
) -> float:
    """Samples/s of ``setup.steps`` steps after ``setup.warmup`` unmeasured ones."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    run = Run(setup.cfg, world, device, TrainerMetrics("bench", world.rank))
    trainer = Trainer(run, model, ForwardBackward(model), optimizer)
    trainer.run_epoch(data[: setup.warmup])
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
    started = time.perf_counter()
    result = trainer.run_epoch(data[setup.warmup :])
    return result.samples / (time.perf_counter() - started)


def build(setup: Setup, device: torch.device) -> nn.Module:
    return models.build(setup.cfg, setup.cfg.synthetic_shape, setup.cfg.classes).to(device)


def device_for(rank: int) -> torch.device:
    return torch.device("cuda", rank) if torch.cuda.is_available() else torch.device("cpu")


def ddp_worker(rank: int, setup: Setup, port: int, results: SimpleQueue[float]) -> None:
    torch.set_num_threads(setup.threads)
    world_size = setup.world_size
    device = device_for(rank)
    world = World(rank, world_size, rank, "127.0.0.1", port, "bench", "", 0, world_size > 1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    backend = "nccl" if device.type == "cuda" else "gloo"
    distributed.init_process_group(world, backend, device, 300)
    wrapped = ddp.wrap(build(setup, device), device, setup.cfg)
    rate = timed(setup, wrapped, device, batches(setup, device, setup.cfg.batch_size), world)
    results.put(rate)
    distributed.destroy_process_group()


def run_ddp(setup: Setup) -> float:
    """Samples/s of all DDP ranks together (each runs the same number of steps)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    results: SimpleQueue[float] = context.SimpleQueue()
    workers = [
        context.Process(target=ddp_worker, args=(rank, setup, port, results))
        for rank in range(setup.world_size)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise SystemExit(f"a DDP worker failed with exit code {worker.exitcode}")
    rates = [results.get() for _ in range(setup.world_size)]
    # The slowest rank sets the pace: the ranks wait for each other every step.
    return min(rates) * len(rates)


def run_plain(setup: Setup) -> float:
    torch.set_num_threads(setup.threads)
    device = device_for(0)
    return timed(setup, build(setup, device), device, batches(setup, device, setup.cfg.batch_size))


def run_data_parallel(setup: Setup) -> float:
    torch.set_num_threads(setup.threads)
    device = device_for(0)
    model = nn.DataParallel(build(setup, device))
    total_batch = setup.cfg.batch_size * torch.cuda.device_count()
    return timed(setup, model, device, batches(setup, device, total_batch))


def line(name: str, rate: float, extra: str = "") -> None:
    print(f"{name:<28} {rate:>10.1f} samples/s  {extra}".rstrip(), flush=True)


def main() -> None:
    setup = parse()
    cfg, world = setup.cfg, setup.world_size
    gpus = torch.cuda.device_count()
    where = f"{gpus} x {torch.cuda.get_device_name(0)}" if gpus else f"CPU, {os.cpu_count()} cores"
    size = (
        f"{cfg.transformer_layers} layers x {cfg.transformer_dim}"
        if cfg.model == "transformer"
        else ""
    )
    print(
        f"{where}; torch {torch.__version__}; model {cfg.model} {size}; samples "
        f"{cfg.synthetic_shape}; batch {cfg.batch_size}/process; {setup.steps} steps after "
        f"{setup.warmup} warm-up; {setup.threads} CPU thread(s)/process"
    )
    runs: list[tuple[str, Callable[[Setup], float]]] = [("plain", run_plain), ("ddp", run_ddp)]
    rates = {name: fn(setup) for name, fn in runs}
    line("plain loop, 1 process", rates["plain"])
    ratio = rates["ddp"] / rates["plain"]
    line(
        f"DDP, {world} process(es)",
        rates["ddp"],
        f"ratio to plain {ratio:.2f}, per process {ratio / world:.2f}",
    )
    if gpus >= 2:
        dp_rate = run_data_parallel(setup)
        line(
            f"DataParallel, {gpus} GPUs",
            dp_rate,
            f"DDP / DataParallel {rates['ddp'] / dp_rate:.2f}",
        )


if __name__ == "__main__":
    main()
