"""Keeping a job's later pods off the nodes where infrastructure faults ended its pods
(pure).

status.avoidedNodes lists them (the latest MAX_AVOIDED_NODES, for the job's life); the
desired pods get a required node anti-affinity on those names (`kubernetes.io/hostname
NotIn [...]`, added to every term of the template's own required node affinity, which
the scheduler ORs). Unless the other nodes could never run the job (policy/kube/fit.py: no
other node fits a pod, or they could not hold all its pods at once even if they ran
nothing else): then the pods are not kept off anything, and the Created condition says
so.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from multigpu_operator.api.failure_policy import Fault
from multigpu_operator.api.limits import MAX_AVOIDED_NODES
from multigpu_operator.plan import DesiredState
from multigpu_operator.policy.failures.failed_pods import Failure
from multigpu_operator.policy.kube.fit import copies_that_fit, never_fits

HOSTNAME_LABEL = "kubernetes.io/hostname"
# Faults that say the node is bad; a preempted or evicted pod's node may be fine.
NODE_FAULTS = frozenset({Fault.NODE_LOST, Fault.NODE_SHUTDOWN, Fault.GPU_UNHEALTHY})


def avoided_after(avoided: Sequence[str], failures: Sequence[Failure]) -> list[str]:
    """The avoided nodes once these failures are taken into account: the latest ones."""
    added = [f.diagnosis.node for f in failures if f.diagnosis and f.fault in NODE_FAULTS]
    kept = [n for n in avoided if n not in added] + list(dict.fromkeys(n for n in added if n))
    return kept[-MAX_AVOIDED_NODES:]


def avoiding(
    desired: DesiredState, avoided: Sequence[str], nodes: Sequence[Mapping[str, Any]]
) -> tuple[tuple[str, ...], str]:
    """The nodes to keep the pods off (none if the job could not run without them), and
    a line saying so, or why not ("" when nothing is avoided)."""
    if not avoided:
        return (), ""
    listed = ", ".join(avoided)
    why = _cannot_avoid(desired, avoided, nodes)
    if why:
        return (), f"not avoiding nodes {listed} (faults before): {why}"
    return tuple(avoided), f"avoiding nodes {listed} (faults before)"


def _cannot_avoid(
    desired: DesiredState, avoided: Sequence[str], nodes: Sequence[Mapping[str, Any]]
) -> str:
    """Why the job could never run on the other nodes when it could on all of them;
    "" when it could, or when that is not known (no nodes seen)."""
    if not nodes or not desired.pods:
        return ""
    others = [n for n in nodes if n["metadata"]["name"] not in avoided]
    if not others:
        return "there is no other node"
    # The pods of a job come from one template: they ask for the same, and all of them
    # must fit at once (a gang). One is checked: a pass stays O(nodes) at 5,000 pods.
    pod, wanted = desired.pods[0], len(desired.pods)
    cannot = never_fits(pod, others)
    if cannot is not None and never_fits(pod, nodes) is None:
        return cannot.message()
    room = copies_that_fit(pod, others)
    if room < wanted <= copies_that_fit(pod, nodes):
        return f"the other nodes could never hold all {wanted} pods at once (only {room})"
    return ""


def kept_off(pod: Mapping[str, Any], avoided: Sequence[str]) -> dict[str, Any]:
    """`pod` with a required node anti-affinity on `avoided` (a copy; `pod` is left as
    it was). Only the pods being created get it: a pass never copies every desired pod."""
    out = copy.deepcopy(dict(pod))
    expression = {"key": HOSTNAME_LABEL, "operator": "NotIn", "values": sorted(avoided)}
    node = out.setdefault("spec", {}).setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    # Terms are ORed: each must keep the pod off the nodes.
    required["nodeSelectorTerms"] = [
        {**t, "matchExpressions": [*(t.get("matchExpressions") or []), expression]} for t in terms
    ]
    return out
