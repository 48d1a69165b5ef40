"""The figures of a GPU check, each measured in this run, through the trainer's own loop.

- DDP on one device against a plain loop, same model (the FLOPs model) and batches,
  alternated a few times (the median of each): what DDP costs where it cannot gain.
  Goal: >= 0.97.
- DataParallel over every device against DDP with one process per device.
- Model FLOPs utilisation of the transformer in bf16 (fp16 on cards before compute
  capability 8.0, where bf16 is emulated): the FLOPs of a forward and backward (torch's
  FlopCounterMode), times steps per second, over the card's dense 16-bit peak.
- NCCL all-reduce bus bandwidth, as nccl-tests reports it: bytes / time x 2(n-1)/n.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import statistics
import time
from dataclasses import dataclass, replace
from multiprocessing.queues import SimpleQueue

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from multigpu_train import ddp, distributed, models
from multigpu_train.config import TrainConfig
from multigpu_train.metrics import TrainerMetrics
from multigpu_train.precision import Precision
from multigpu_train.steps import ForwardBackward
from multigpu_train.trainer import Batch, Run, Trainer
from multigpu_train.world import World

# Dense 16-bit tensor-core peaks from NVIDIA's data sheets (TFLOP/s, without sparsity):
# bf16, and fp16 for the cards without bf16 (T4, V100; equal to bf16 on the others). By
# the exact name torch reports, less its "NVIDIA " or "Tesla " prefix: a substring match
# took "H200 NVL" for an H200 and "L40" for an L4.
PEAK_16BIT_TFLOPS = {
    "H100 80GB HBM3": 989.0,
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H200": 989.0,
    "H200 NVL": 835.0,
    "GH200 480GB": 989.0,
    "GH200 144G HBM3e": 989.0,
    "B200": 2250.0,
    "GB200": 2500.0,
    "A100-SXM4-40GB": 312.0,
    "A100-SXM4-80GB": 312.0,
    "A100-PCIE-40GB": 312.0,
    "A100 80GB PCIe": 312.0,
    "L40S": 362.0,
    "L40": 181.0,
    "L4": 121.0,
    "A10G": 70.0,
    "A10": 125.0,
    "T4": 65.0,
    "V100-SXM2-16GB": 125.0,
    "V100-SXM2-32GB": 125.0,
    "V100-PCIE-16GB": 112.0,
    "V100-PCIE-32GB": 112.0,
}
DDP_GOAL = 0.97


@dataclass(frozen=True)
class Sizes:
    """How big the measured work is: a GPU needs more of it to be timed well."""

    model: TrainConfig  # the DDP / DataParallel model and batch (per process)
    steps: int
    warmup: int
    repeats: int
    flops_model: TrainConfig  # the transformer whose FLOPs utilisation is measured
    allreduce_bytes: int


GPU_SIZES = Sizes(
    model=TrainConfig(model="transformer", synthetic_shape=(3, 32, 32), batch_size=64),
    steps=50,
    warmup=10,
    repeats=3,
    flops_model=TrainConfig(
        model="transformer",
        synthetic_shape=(1, 512, 1024),
        transformer_dim=1024,
        transformer_layers=8,
        transformer_heads=16,
        batch_size=16,
    ),
    allreduce_bytes=512 * 2**20,
)
CPU_SIZES = Sizes(
    model=TrainConfig(model="transformer", synthetic_shape=(1, 16, 16), batch_size=16),
    steps=10,
    warmup=2,
    repeats=2,
    flops_model=TrainConfig(
        model="transformer",
        synthetic_shape=(1, 32, 64),
        transformer_dim=64,
        transformer_layers=2,
        transformer_heads=4,
        batch_size=8,
    ),
    allreduce_bytes=4 * 2**20,
)
ONE_PROCESS = World(0, 1, 0, None, None, "gpu-check", "", 0, False)


def peak_tflops(device_name: str) -> float | None:
    """The card's dense 16-bit peak, or None for a name not in the table."""
    name = device_name.strip()
    for prefix in ("NVIDIA ", "Tesla "):
        name = name.removeprefix(prefix)
    return PEAK_16BIT_TFLOPS.get(name)


def bus_bandwidth(nbytes: int, seconds_per_op: float, ranks: int) -> float:
    """Bytes/s on the bus of one all-reduce of ``nbytes`` (nccl-tests' busbw)."""
    return nbytes / seconds_per_op * 2 * (ranks - 1) / ranks


def batches(cfg: TrainConfig, device: torch.device, count: int, batch: int) -> list[Batch]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((batch, *cfg.synthetic_shape), generator=gen).to(device)
    y = torch.randint(0, cfg.classes, (batch,), generator=gen).to(device)
    return [(x, y)] * count


def samples_per_second(
    sizes: Sizes,
    model: nn.Module,
    step: ForwardBackward,
    device: torch.device,
    data: list[Batch],
    world: World = ONE_PROCESS,
) -> float:
    """``sizes.steps`` timed steps after ``sizes.warmup`` untimed ones."""
    run = Run(sizes.model, world, device, TrainerMetrics("gpu-check", world.rank))
    trainer = Trainer(run, model, step, torch.optim.Adam(model.parameters(), lr=1e-4))
    trainer.run_epoch(data[: sizes.warmup])
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()
    result = trainer.run_epoch(data[sizes.warmup :])
    return result.samples_per_second


def build(cfg: TrainConfig, device: torch.device) -> nn.Module:
    return models.build(cfg, cfg.synthetic_shape, cfg.classes).to(device)


def ddp_against_plain(
    sizes: Sizes, device: torch.device, backend: str, precision: str = "bf16"
) -> tuple[float, float]:
    """Samples/s of a plain loop and of DDP in a world of one, on ``device``.

    On the FLOPs model in ``precision``: a model whose step takes milliseconds of GPU
    work, so the ratio measures DDP's hooks and bucket copies, not Python's launch
    overhead of a tiny model (which DDP's extra Python would dominate).
    """
    cfg = sizes.flops_model
    distributed.init_process_group(ONE_PROCESS, backend, device, 300)
    try:
        data = batches(cfg, device, sizes.warmup + sizes.steps, cfg.batch_size)
        plain_model = build(cfg, device)
        ddp_model = build(cfg, device)
        plain_precision = Precision(precision, device.type)
        ddp_precision = Precision(precision, device.type)
        plain_step = ForwardBackward(plain_precision.wrap(plain_model), precision=plain_precision)
        forward = ddp_precision.wrap(ddp_model)
        ddp_step = ForwardBackward(
            ddp.wrap(forward, device, cfg), evaluate=forward, precision=ddp_precision
        )
        timed = replace(sizes, model=cfg)
        plain: list[float] = []
        with_ddp: list[float] = []
        # Alternated, so that a clock or thermal drift hits both alike.
        for _ in range(sizes.repeats):
            plain.append(samples_per_second(timed, plain_model, plain_step, device, data))
            with_ddp.append(samples_per_second(timed, ddp_model, ddp_step, device, data))
        return statistics.median(plain), statistics.median(with_ddp)
    finally:
        distributed.destroy_process_group()


def model_flops_utilisation(
    sizes: Sizes, device: torch.device, precision_name: str = "bf16"
) -> tuple[float, float]:
    """TFLOP/s achieved by the transformer in ``precision_name``, and its FLOPs per step
    (forward and backward of one batch; the optimizer is not model FLOPs)."""
    cfg = sizes.flops_model
    model = build(cfg, device)
    precision = Precision(precision_name, device.type)
    step = ForwardBackward(precision.wrap(model), precision=precision)
    data = batches(cfg, device, sizes.warmup + sizes.steps, cfg.batch_size)
    with FlopCounterMode(display=False) as counter:
        step.forward_backward(*data[0], loss_scale=1.0, sync=True)
    model.zero_grad(set_to_none=True)
    flops = float(counter.get_total_flops())
    rate = samples_per_second(replace(sizes, model=cfg), model, step, device, data)
    steps_per_second = rate / cfg.batch_size
    return flops * steps_per_second / 1e12, flops


@dataclass(frozen=True)
class RankFigures:
    samples_per_second: float
    bus_bytes_per_second: float


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _rank_worker(
    rank: int,
    ranks: int,
    port: int,
    device_type: str,
    sizes: Sizes,
    results: SimpleQueue[tuple[int, RankFigures]],
) -> None:
    device = torch.device("cuda", rank) if device_type == "cuda" else torch.device("cpu")
    if device_type == "cpu":
        torch.set_num_threads(max((os.cpu_count() or 1) // ranks, 1))
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    world = World(rank, ranks, rank, "127.0.0.1", port, "gpu-check", "", 0, False)
    backend = "nccl" if device_type == "cuda" else "gloo"
    distributed.init_process_group(world, backend, device, 300)
    try:
        model = build(sizes.model, device)
        step = ForwardBackward(ddp.wrap(model, device, sizes.model), evaluate=model)
        data = batches(sizes.model, device, sizes.warmup + sizes.steps, sizes.model.batch_size)
        rate = samples_per_second(sizes, model, step, device, data, world)
        results.put((rank, RankFigures(rate, _all_reduce(sizes.allreduce_bytes, device, ranks))))
    finally:
        distributed.destroy_process_group()
    # As the trainer does: a finished gloo rank may abort in interpreter finalization
    # (exit -6, "terminate called without an active exception"). The queue's put has
    # written its bytes already (a SimpleQueue has no feeder thread).
    distributed.exit_after_success()


def _all_reduce(nbytes: int, device: torch.device, ranks: int, iterations: int = 20) -> float:
    tensor = torch.ones(nbytes // 4, dtype=torch.float32, device=device)

    def wait() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(5):
        dist.all_reduce(tensor)
    wait()
    dist.barrier()
    started = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    wait()
    return bus_bandwidth(nbytes, (time.perf_counter() - started) / iterations, ranks)


def ddp_on_every_device(sizes: Sizes, device_type: str, ranks: int) -> list[RankFigures]:
    """One DDP process per device (spawned), each timed, then an all-reduce measured."""
    context = multiprocessing.get_context("spawn")
    results: SimpleQueue[tuple[int, RankFigures]] = context.SimpleQueue()
    port = _free_port()
    workers = [
        context.Process(target=_rank_worker, args=(r, ranks, port, device_type, sizes, results))
        for r in range(ranks)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    if failed:
        raise RuntimeError(f"DDP worker(s) exited with {failed}")
    figures = dict(results.get() for _ in range(ranks))
    return [figures[r] for r in range(ranks)]


def data_parallel(sizes: Sizes, device_type: str, ranks: int) -> float:
    """Samples/s of nn.DataParallel over every device, ``ranks`` x the per-process batch."""
    device = torch.device("cuda", 0) if device_type == "cuda" else torch.device("cpu")
    model = build(sizes.model, device)
    step = ForwardBackward(nn.DataParallel(model))
    batch = sizes.model.batch_size * ranks
    data = batches(sizes.model, device, sizes.warmup + sizes.steps, batch)
    per_process = replace(sizes, model=replace(sizes.model, batch_size=batch))
    return samples_per_second(per_process, model, step, device, data)
