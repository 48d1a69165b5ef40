"""One module per training mode; each turns a job at a given size into a ModeLayout."""

from __future__ import annotations

from dataclasses import dataclass

from multigpu_operator.plan.env import EnvVar


@dataclass(frozen=True)
class ModeLayout:
    """What a mode decides for a job at a given number of pods."""

    # Training processes (what WORLD_SIZE counts); None when rendezvous decides it.
    world_size: int | None
    # The mode's variables for each replica index, after the common ones.
    env: tuple[tuple[EnvVar, ...], ...]
