"""Rank 0's checkpoint on every rank, one tensor at a time, into its final place.

Sent as one pickled object (``broadcast_object_list``), a checkpoint was held several
times over at a resume: rank 0 pickled its mapped file into a buffer, and every other
rank received that buffer, unpickled it, then loaded the copy into its model. Measured
with a 72.5 MiB checkpoint: 4.1x and 4.0x the checkpoint's size in resident memory.

Here rank 0 sends the checkpoint's shape first (every value but the tensors, each tensor
replaced by its shape and dtype: a few KiB), then each tensor with
``torch.distributed.broadcast``. A receiving rank writes each into where it is going to
stay: a weight straight into the model's own parameter (``into``), an optimizer
moment into one tensor allocated for it, which the optimizer then keeps. Rank 0 sends
from its mapped file without a copy. No rank holds more than one copy of the state.
``scatter`` does the same for a pipeline's stages, each sent only its own share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch
import torch.distributed as dist


class TensorSpec(NamedTuple):
    """A tensor's place in the checkpoint's shape: what a receiver allocates."""

    shape: tuple[int, ...]
    dtype: torch.dtype


def _walk(value: Any, path: tuple[Any, ...], leaf: Callable[[Any, tuple[Any, ...]], Any]) -> Any:
    """``value`` with every tensor or TensorSpec replaced by ``leaf(it, its path)``."""
    if isinstance(value, torch.Tensor | TensorSpec):
        return leaf(value, path)
    if isinstance(value, dict):
        return {key: _walk(item, (*path, key), leaf) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_walk(item, (*path, i), leaf) for i, item in enumerate(value))
    return value


def shape_of(state: Any) -> Any:
    """``state`` with each tensor replaced by its TensorSpec."""
    return _walk(state, (), lambda t, _: TensorSpec(tuple(t.shape), t.dtype))


def _receiver(
    into: Mapping[tuple[Any, ...], torch.Tensor] | None,
    transfer: Callable[[torch.Tensor], object],
) -> Callable[[TensorSpec, tuple[Any, ...]], torch.Tensor]:
    """What receives a tensor of the shape: into its target in ``into`` when it fits
    (a CPU tensor of that shape and dtype: filled in place, and standing in the
    result), else into a new CPU tensor."""
    targets = into or {}

    def receive(spec: TensorSpec, path: tuple[Any, ...]) -> torch.Tensor:
        target = targets.get(path)
        fits = (
            target is not None
            and target.device.type == "cpu"
            and tuple(target.shape) == spec.shape
            and target.dtype == spec.dtype
            and target.is_contiguous()
        )
        buffer = (
            target if fits and target is not None else torch.empty(spec.shape, dtype=spec.dtype)
        )
        transfer(buffer)
        return buffer

    return receive


def broadcast(
    state: Any,
    group: dist.ProcessGroup | None,
    into: Mapping[tuple[Any, ...], torch.Tensor] | None = None,
) -> Any:
    """Rank 0's ``state`` (other ranks pass None) on every rank of ``group``.

    ``into`` maps a tensor's path in the state (``("model", name)``) to a CPU tensor of
    the same shape and dtype to receive it: it is filled in place and stands in the
    result. Other tensors arrive on the CPU. None on every rank if rank 0 has None.
    """
    if group is None:
        return state
    sending = dist.get_rank() == 0
    box = [shape_of(state) if sending else None]
    dist.broadcast_object_list(box, src=0, group=group)
    shape = box[0]
    if shape is None:
        return None

    def send(tensor: torch.Tensor, _: tuple[Any, ...]) -> torch.Tensor:
        dist.broadcast(tensor.detach().contiguous(), src=0, group=group)
        return tensor

    if sending:
        return _walk(state, (), send)
    receive = _receiver(into, lambda buffer: dist.broadcast(buffer, src=0, group=group))
    return _walk(shape, (), receive)


def scatter(
    shares: list[Any] | None,
    group: dist.ProcessGroup | None,
    into: Mapping[tuple[Any, ...], torch.Tensor] | None = None,
) -> Any:
    """Item r of rank 0's ``shares`` (other ranks pass None) on rank r: its shape as an
    object, then each tensor sent to that rank alone. ``into`` as for ``broadcast``.
    ``group`` must hold every rank of the job (ranks in it are global ranks)."""
    if group is None:
        return shares[0] if shares else None
    rank = dist.get_rank()
    box: list[Any] = [None]
    shapes = [shape_of(share) for share in shares] if shares is not None else None
    dist.scatter_object_list(box, shapes, src=0, group=group)
    if rank == 0:
        assert shares is not None
        for receiver, share in enumerate(shares[1:], start=1):

            def send(tensor: torch.Tensor, _: tuple[Any, ...], to: int = receiver) -> torch.Tensor:
                dist.send(tensor.detach().contiguous(), dst=to, group=group)
                return tensor

            _walk(share, (), send)
        return shares[0]
    shape = box[0]
    if shape is None:
        return None
    receive = _receiver(into, lambda buffer: dist.recv(buffer, src=0, group=group))
    return _walk(shape, (), receive)
