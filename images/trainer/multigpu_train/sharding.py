"""Sharded data parallel (FSDP2): parameters, gradients and optimizer state split across
ranks, as an option of the DistributedDataParallel entrypoint (``--sharding``).

- ``full``: every rank holds 1/N of each block; a block's parameters are all-gathered
  just before its forward (and again before its backward), its gradients
  reduce-scattered after. Memory per rank falls with N; traffic is about 1.5x DDP's.
- ``hybrid``: shard within a pod, replicate across pods (HSDP). A 2-D DeviceMesh
  (replicate, shard) of (pods, processes per pod): the all-gathers and
  reduce-scatters stay on the pod's own links (NVLink), and only a gradient
  all-reduce between pods' replicas crosses the network. Processes per pod:
  ``LOCAL_WORLD_SIZE`` (what torchrun gives each worker, and the operator each
  one-process pod), else ``PET_NPROC_PER_NODE``, else ``NPROC_PER_NODE``, else 1.
- ``none`` (default): DistributedDataParallel, every rank a whole replica.

``fully_shard`` is applied to each block (blocks.py), then to the root, which takes
what is left (embeddings, head): one all-gather per block, so at most about one block's
full parameters exist at a time besides the root's. Mixed precision is the sharding's
own policy, not autocast: with ``--precision bf16`` the gathered parameters and the
computation are bf16 and gradients are reduced in fp32 (MixedPrecisionPolicy); the
sharded parameters and the optimizer stay fp32. fp32 (the CPU tests) has no policy.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

from multigpu_train.blocks import blocks_of
from multigpu_train.config import SHARDINGS
from multigpu_train.errors import SetupError

log = logging.getLogger(__name__)

PER_POD_VARIABLES = ("LOCAL_WORLD_SIZE", "PET_NPROC_PER_NODE", "NPROC_PER_NODE")


def per_pod(environ: Mapping[str, str]) -> int:
    """Processes per pod, from the first of PER_POD_VARIABLES that is a number."""
    for name in PER_POD_VARIABLES:
        raw = environ.get(name, "")
        if raw.isdigit() and int(raw) > 0:
            return int(raw)
    return 1


def mesh_shape(kind: str, world_size: int, processes_per_pod: int) -> tuple[int, ...]:
    """The DeviceMesh's shape: (ranks,) for ``full``, (pods, per pod) for ``hybrid``."""
    if kind == "full":
        return (world_size,)
    if kind != "hybrid":
        raise SetupError(f"no mesh for --sharding {kind}")
    if world_size % processes_per_pod:
        raise SetupError(
            f"--sharding hybrid shards within a pod of {processes_per_pod} processes "
            f"(LOCAL_WORLD_SIZE), but WORLD_SIZE={world_size} is not a multiple of it"
        )
    return (world_size // processes_per_pod, processes_per_pod)


def check(kind: str, precision: str, world_size: int, environ: Mapping[str, str]) -> None:
    """The sharding's own rules, checked before any rank waits on another."""
    if kind not in SHARDINGS:
        raise SetupError(f"--sharding {kind}: expected one of {', '.join(SHARDINGS)}")
    if kind == "none":
        return
    if precision == "fp16":
        raise SetupError(
            "--sharding with --precision fp16 is not supported (it needs a sharded "
            "gradient scaler): use bf16, which needs none, or fp32"
        )
    mesh_shape(kind, world_size, per_pod(environ))


def build_mesh(
    kind: str, world_size: int, environ: Mapping[str, str], device_type: str
) -> DeviceMesh:
    shape = mesh_shape(kind, world_size, per_pod(environ))
    names = ("shard",) if len(shape) == 1 else ("replicate", "shard")
    log.info(
        "sharding %s: device mesh %s %s", kind, dict(zip(names, shape, strict=True)), device_type
    )
    return init_device_mesh(device_type, shape, mesh_dim_names=names)


def policy(precision: str) -> MixedPrecisionPolicy:
    """bf16 parameters and compute with fp32 gradient reduction, or plain fp32."""
    if precision == "bf16":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def shard(model: nn.Module, mesh: DeviceMesh, mp_policy: MixedPrecisionPolicy) -> None:
    """``fully_shard`` each block of ``model``, then ``model`` itself, in place: its
    parameters become DTensors, each rank holding its shard; their names stay."""
    for block in blocks_of(model):
        fully_shard(block, mesh=mesh, mp_policy=mp_policy)
    fully_shard(model, mesh=mesh, mp_policy=mp_policy)


def is_sharded(model: nn.Module) -> bool:
    return isinstance(model, FSDPModule)
