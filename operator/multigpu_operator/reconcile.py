"""Observed state + desired state -> the actions that close the gap (pure).

Level-triggered: the result depends only on what exists now, never on what the
operator remembers doing, so a restart in the middle of creating a job's pods
simply finishes the job: pods that exist are left alone, missing ones are created
under the same deterministic names (a duplicate create is an AlreadyExists, not a
second pod).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from multigpu_operator.plan import DesiredState
from multigpu_operator.policy.status import TERMINAL, Phase


@dataclass(frozen=True)
class Actions:
    create_pods: tuple[dict[str, Any], ...]
    delete_pods: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.create_pods and not self.delete_pods


def plan_actions(
    desired: DesiredState, observed: Sequence[Mapping[str, Any]], phase: Phase | None
) -> Actions:
    """Pods to create or delete so the job's pods match `desired`.

    A finished job gets no new pods. Pods that the plan no longer wants (an elastic
    job scaled down) are deleted, highest index first.
    """
    existing = {p["metadata"]["name"] for p in observed}
    wanted = {p["metadata"]["name"] for p in desired.pods}
    if phase in TERMINAL:
        return Actions(create_pods=(), delete_pods=())
    create = tuple(p for p in desired.pods if p["metadata"]["name"] not in existing)
    extra = [
        p
        for p in observed
        if p["metadata"]["name"] not in wanted and not p["metadata"].get("deletionTimestamp")
    ]
    extra.sort(key=_index, reverse=True)
    return Actions(create_pods=create, delete_pods=tuple(p["metadata"]["name"] for p in extra))


def _index(pod: Mapping[str, Any]) -> int:
    raw = pod["metadata"].get("labels", {}).get("multigpu.dev/replica-index", "-1")
    try:
        return int(raw)
    except ValueError:
        return -1
