"""Which desired pods to create (pure): those whose name is free, labelled with the
attempt, kept off the avoided nodes (policy/failures/avoidance.py) and pinned to their
topology domain (policy/placement/placed.py). A name is reused only once
its previous pod is gone, so a replaced attempt's pods are created in the pass after the
old ones have left (all of them together when they are given nodes in rank order)."""

from __future__ import annotations

from multigpu_operator.api.pod_labels import attempt_of, with_attempt
from multigpu_operator.policy.failures.avoidance import kept_off
from multigpu_operator.policy.kube.pods import name_of
from multigpu_operator.policy.step import Observed, Outcome, Progress


def missing_pods(seen: Observed, progress: Progress) -> Outcome:
    taken = {name_of(p) for p in seen.pods}
    pods = [with_attempt(p, progress.attempt) for p in seen.desired.pods if name_of(p) not in taken]
    if not pods:
        return Outcome()
    if seen.placement is not None and any(seen.placement.hosts):
        # Pods given nodes in rank order are created together, once every name is free:
        # a pass that created some would give the rest nodes from a later look.
        wanted = {name_of(p) for p in seen.desired.pods}
        if any(name_of(p) in wanted and attempt_of(p) < progress.attempt for p in seen.pods):
            return Outcome()
    if seen.avoided:
        pods = [kept_off(p, seen.avoided) for p in pods]
    if seen.placement is not None:
        pods = [seen.placement.pin(p, seen.job.ref.name) for p in pods]
    return Outcome(create_pods=tuple(pods))
