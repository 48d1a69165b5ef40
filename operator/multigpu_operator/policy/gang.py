"""Gang start: are enough of an attempt's pods scheduled, and if not, why not (pure)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The scheduler's reason while a scheduling gate (e.g. Kueue's admission gate) holds a pod.
SCHEDULING_GATED = "SchedulingGated"
# The scheduler's reason when no node fits a pod now.
UNSCHEDULABLE = "Unschedulable"


@dataclass(frozen=True)
class Scheduling:
    scheduled: int
    # Not on a node: reported Unschedulable by the scheduler, or not yet looked at.
    unscheduled: int
    unschedulable: int
    gated: int
    # The scheduler's most common message for the unscheduled pods, e.g.
    # "0/5 nodes are available: 4 Insufficient nvidia.com/gpu, ...".
    why: str

    def shortage(self, needed: int) -> str:
        total = self.scheduled + self.unscheduled
        floor = f" (at least {needed} must be scheduled)" if needed < total else ""
        return f"{self.unscheduled} of {total} pods unscheduled{floor}: {self.why}"


def scheduling(pods: Sequence[Mapping[str, Any]]) -> Scheduling:
    """Live pods only (not being deleted, not finished)."""
    scheduled = unscheduled = unschedulable = gated = 0
    messages: Counter[str] = Counter()
    for pod in pods:
        if pod.get("spec", {}).get("nodeName"):
            scheduled += 1
            continue
        cond = _pod_scheduled(pod)
        if cond.get("reason") == SCHEDULING_GATED:
            gated += 1
            continue
        unscheduled += 1
        if cond.get("reason") == UNSCHEDULABLE:
            unschedulable += 1
            messages[cond.get("message") or UNSCHEDULABLE] += 1
    why = messages.most_common(1)[0][0] if messages else "waiting for the scheduler"
    return Scheduling(scheduled, unscheduled, unschedulable, gated, why.strip())


def _pod_scheduled(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for cond in pod.get("status", {}).get("conditions", []) or []:
        if cond.get("type") == "PodScheduled":
            return dict(cond)
    return {}
