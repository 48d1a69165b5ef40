"""Can any node of the cluster ever run this pod? (pure)

To the scheduler "the cluster is busy" and "no node can ever fit this pod" look alike:
the pod is Unschedulable. They are told apart here from what does not change while a job
waits: each node's allocatable resources, labels and lasting taints, and the pod's
requests, node selector and tolerations. What runs on the nodes now is left out, and so
are cordons and the taints that come and go with a node's state (not-ready, pressure,
an autoscaler removing it), required node affinity and topology constraints: a pod is
said never to fit only when that is certain, never because of something that may pass.

Nodes are read as the node informer (cluster/nodes.py) trims them:
`{metadata: {name, labels}, spec: {taints}, status: {allocatable}}`; a pod as the pod
informer (cluster/informer.py) keeps it, with the spec fields the scheduler fits it by as
admission left them (LimitRange defaults, a webhook's tolerations, a RuntimeClass's
overhead).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from multigpu_operator.plan.pod import GPU_PRODUCT_LABEL
from multigpu_operator.policy.kube.quantity import format_quantity, parse_quantity

Node = Mapping[str, Any]

# Only these effects keep a pod off a node (PreferNoSchedule is a preference).
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
# Taints that describe a passing state of a node (set and removed by the node lifecycle
# controller, cloud providers and autoscalers), not what the node is for.
_PASSING_TAINT_PREFIXES = (
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "karpenter.sh/",
)
_PASSING_TAINTS = frozenset(
    {"ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler"}
)
# Resources counted in bytes: shown in binary units.
_BYTES = ("memory", "ephemeral-storage")


@dataclass(frozen=True)
class NoFit:
    pod: str
    why: str

    def message(self) -> str:
        return f"no node can ever fit pod {self.pod}: {self.why}"


def never_fits(pod: Mapping[str, Any], nodes: Sequence[Node]) -> NoFit | None:
    """Why no node of `nodes` could run `pod` even if it ran nothing else; None if one
    could, or if no nodes are known (not listed yet, or not allowed to list them)."""
    if not nodes:
        return None
    name = str(pod["metadata"]["name"])
    spec = pod.get("spec") or {}
    selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
    labelled = [n for n in nodes if _has_labels(n, selector)]
    if not labelled:
        return NoFit(name, _no_labels(selector, nodes))
    tolerations = spec.get("tolerations") or []
    allowed = [n for n in labelled if not _untolerated(n, tolerations)]
    if not allowed:
        return NoFit(name, _no_toleration(labelled, tolerations))
    requests = pod_requests(spec)
    if any(_has_room(n, requests) for n in allowed):
        return None
    which = "the largest node" if len(allowed) == len(nodes) else "the largest node it may use"
    return NoFit(name, _too_big(requests, allowed, which))


def copies_that_fit(pod: Mapping[str, Any], nodes: Sequence[Node]) -> int:
    """How many copies of `pod` the nodes could hold at once if they ran nothing else:
    on each node it may use (labels, lasting taints), as many as its allocatable
    resources hold."""
    spec = pod.get("spec") or {}
    selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
    tolerations = spec.get("tolerations") or []
    requests = {r: q for r, q in pod_requests(spec).items() if q > 0}
    total = 0
    for node in nodes:
        if not _has_labels(node, selector) or _untolerated(node, tolerations):
            continue
        allocatable = _quantities(node.get("status", {}).get("allocatable") or {})
        per_node = [int(allocatable.get(r, Decimal(0)) // q) for r, q in requests.items()]
        total += min(per_node) if per_node else 1_000_000  # asks for nothing: any number
    return total


def usable_nodes(pod: Mapping[str, Any], nodes: Sequence[Node]) -> list[Node]:
    """The nodes `pod` may run on by what lasts: its nodeSelector's labels and the
    nodes' lasting taints it does not tolerate."""
    spec = pod.get("spec") or {}
    selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
    tolerations = spec.get("tolerations") or []
    return [n for n in nodes if _has_labels(n, selector) and not _untolerated(n, tolerations)]


def allocatable(node: Node) -> dict[str, Decimal]:
    """The node's allocatable resources, parsed."""
    return _quantities(node.get("status", {}).get("allocatable") or {})


def pod_requests(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """What the scheduler reserves for a pod: its containers and restartable init
    containers (sidecars) together, or an init container with the sidecars started
    before it if that is more, plus the pod's overhead. A container's request defaults
    to its limit, as the API server defaults it."""
    total: dict[str, Decimal] = {}
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for container in spec.get("initContainers") or []:
        own = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, own)
        else:
            init_peak = _max(init_peak, _add(sidecars, own))
    for container in spec.get("containers") or []:
        total = _add(total, _container_requests(container))
    overhead = _quantities(spec.get("overhead") or {})
    return _add(_max(_add(total, sidecars), init_peak), overhead)


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    return _quantities({**(resources.get("limits") or {}), **(resources.get("requests") or {})})


def _quantities(raw: Mapping[str, Any]) -> dict[str, Decimal]:
    """Parsed quantities; one that does not parse is left out (the API server refuses
    such a pod anyway, with a better message)."""
    out = {}
    for resource, value in raw.items():
        try:
            out[str(resource)] = parse_quantity(value)
        except ValueError:
            continue
    return out


def _add(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    return {k: a.get(k, Decimal(0)) + b.get(k, Decimal(0)) for k in {**a, **b}}


def _max(a: Mapping[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    return {k: max(a.get(k, Decimal(0)), b.get(k, Decimal(0))) for k in {**a, **b}}


def _labels(node: Node) -> Mapping[str, str]:
    return node.get("metadata", {}).get("labels") or {}


def _has_labels(node: Node, selector: Mapping[str, str]) -> bool:
    labels = _labels(node)
    return all(labels.get(key) == value for key, value in selector.items())


def _no_labels(selector: Mapping[str, str], nodes: Sequence[Node]) -> str:
    for key, value in selector.items():
        if any(_labels(n).get(key) == value for n in nodes):
            continue
        source = " (spec.gpuProduct)" if key == GPU_PRODUCT_LABEL else ""
        have = sorted({_labels(n)[key] for n in nodes if key in _labels(n)})
        others = f"; nodes have {key}={', '.join(have[:5])}" if have else ""
        return f"it selects {key}={value}{source} and no node has that label{others}"
    pairs = ", ".join(f"{k}={v}" for k, v in selector.items())
    return f"no node has all the labels of its nodeSelector ({pairs})"


def _untolerated(node: Node, tolerations: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The node's lasting taints that keep the pod off it."""
    return [
        taint
        for taint in node.get("spec", {}).get("taints") or []
        if taint.get("effect") in _BLOCKING_EFFECTS
        and not _passing(str(taint.get("key", "")))
        and not any(_tolerates(t, taint) for t in tolerations)
    ]


def _passing(key: str) -> bool:
    return key in _PASSING_TAINTS or key.startswith(_PASSING_TAINT_PREFIXES)


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' rule: the effect matches (or is empty), the key matches (an empty key
    with Exists matches all), and Exists, or Equal (the default) with the same value."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.get("key"):
        return False
    return operator == "Exists" or (toleration.get("value") or "") == (taint.get("value") or "")


def _no_toleration(nodes: Sequence[Node], tolerations: Sequence[Mapping[str, Any]]) -> str:
    taints: dict[str, int] = {}
    for node in nodes:
        taint = _untolerated(node, tolerations)[0]
        value = f"={taint['value']}" if taint.get("value") else ""
        text = f"{taint.get('key')}{value}:{taint.get('effect')}"
        taints[text] = taints.get(text, 0) + 1
    listed = ", ".join(f"{t} ({n} node{'s' if n > 1 else ''})" for t, n in list(taints.items())[:3])
    return f"every node it selects has a taint it does not tolerate: {listed}"


def _has_room(node: Node, requests: Mapping[str, Decimal]) -> bool:
    allocatable = _quantities(node.get("status", {}).get("allocatable") or {})
    return all(allocatable.get(r, Decimal(0)) >= q for r, q in requests.items() if q > 0)


def _too_big(requests: Mapping[str, Decimal], nodes: Sequence[Node], which: str) -> str:
    allocatable = [_quantities(n.get("status", {}).get("allocatable") or {}) for n in nodes]
    # Extended resources (GPUs) first: they are what a training pod is usually short of.
    wanted = sorted(
        ((r, q) for r, q in requests.items() if q > 0), key=lambda rq: ("/" not in rq[0], rq[0])
    )
    for resource, amount in wanted:
        largest = max(a.get(resource, Decimal(0)) for a in allocatable)
        if amount > largest:
            return f"it asks for {_amount(resource, amount)}, {which} has " + (
                _amount(resource, largest, unit=False) if largest else f"no {resource}"
            )
    asked = ", ".join(_amount(r, q) for r, q in wanted)
    return f"no node has all it asks for at once ({asked})"


def _amount(resource: str, value: Decimal, *, unit: bool = True) -> str:
    text = format_quantity(value, binary=resource in _BYTES or resource.startswith("hugepages-"))
    return f"{text} {resource}" if unit else text
