"""When to have the API server check a job's pod template before any pod exists (pure).

Pods are created with strict field validation, so the server refuses a misspelt field
(`imagePullPolicyy`) when it creates them. A job that creates no pods for now
(suspended, queued in Kueue, waiting for a node) would only learn of it when it starts:
its first planned pod is sent as a server-side dry run instead, once per generation of
its spec. A pass that creates pods needs no dry run: the create is the check, at no extra
request. A job with live pods is not checked either: an edit of its template takes effect
with its next attempt, whose create checks it, and is no reason to fail the pods running.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from multigpu_operator.api.pod_labels import with_attempt
from multigpu_operator.api.status import TERMINAL
from multigpu_operator.plan import DesiredState
from multigpu_operator.policy.kube.pods import being_deleted
from multigpu_operator.policy.step import Decision


def pod_to_dry_run(
    decision: Decision,
    desired: DesiredState,
    pods: Sequence[Mapping[str, Any]],
    generation: int,
    checked: int | None,
) -> dict[str, Any] | None:
    """The pod to send as a dry run in this pass, or None. `checked`: the generation
    whose template the server last accepted (None: none yet, as far as this operator
    knows)."""
    if checked == generation or decision.create_pods or not desired.pods:
        return None
    if decision.status.phase in TERMINAL:
        return None
    if any(not being_deleted(p) for p in pods):
        return None
    return with_attempt(desired.pods[0], decision.status.attempt or 1)
