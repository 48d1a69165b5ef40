"""What the caches keep of a job, a pod or a Service: the fields the controller reads.

Memory grows with the operator's own children (10,000 pods is a size it must hold), so
a pod keeps only our labels, the conditions and container states without timestamps or
mounts, and the strings and sub-objects that every pod of a job repeats are shared.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, TypeVar, cast

import orjson

from multigpu_operator.api.spec import GROUP

T = TypeVar("T")
_OWN_LABEL_PREFIX = f"{GROUP}/"


# What is kept of a pod: its metadata, and the parts of its status the policies read.
_POD_META = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "resourceVersion",
)
_POD_STATUS = ("phase", "reason", "message", "podIP", "startTime")
_CONDITION = ("type", "status", "reason", "message")
# allocatedResourcesStatus: the health of the devices it was given (policy/failures/faults.py).
_CONTAINER_STATUS = ("name", "image", "state", "allocatedResourcesStatus")


def trim_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """Keep what status policy, reconciliation and metrics read: our own labels, the
    conditions and container states without their timestamps and mounts. Strings that
    every pod of a job repeats are shared (sys.intern): 10,000 pods are held in the
    operator, so each byte here counts ten thousand times."""
    meta = pod["metadata"]
    status = pod.get("status", {})
    kept_status = {k: status[k] for k in _POD_STATUS if k in status}
    if "conditions" in status:
        kept_status["conditions"] = _shared(
            [_pick(c, _CONDITION) for c in status["conditions"] or []]
        )
    for key in ("containerStatuses", "initContainerStatuses"):
        if key in status:
            kept_status[key] = [_pick(c, _CONTAINER_STATUS) for c in status[key] or []]
    node = pod.get("spec", {}).get("nodeName")
    return {
        "metadata": {
            "ownerReferences": [
                {"uid": ref["uid"]}
                for ref in meta.get("ownerReferences", [])
                if ref.get("controller")
            ],
            "labels": {
                sys.intern(k): sys.intern(v)
                for k, v in (meta.get("labels") or {}).items()
                if k.startswith(_OWN_LABEL_PREFIX)
            },
            **{k: meta[k] for k in _POD_META if k in meta},
        },
        "spec": {"nodeName": sys.intern(node) if node else node, **_shared(_scheduling(pod))},
        "status": kept_status,
    }


_SHARED_MAX = 4096
_shared_values: dict[bytes, Any] = {}


def _shared(value: T) -> T:
    """One object for equal values (the tolerations and resources of a job's pods, their
    conditions once timestamps are gone). Read-only, like everything the cache holds."""
    key = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    found = _shared_values.get(key)
    if found is not None:
        return cast(T, found)
    if len(_shared_values) >= _SHARED_MAX:
        _shared_values.clear()  # a new generation of values; the old ones stay with their pods
    _shared_values[key] = value
    return value


def _pick(obj: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {
        k: sys.intern(v) if isinstance(v, str) and k != "message" else v
        for k in keys
        if (v := obj.get(k)) is not None
    }


def _scheduling(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What the scheduler fits a pod by, as admission left it (LimitRange defaults, a
    webhook's tolerations, a RuntimeClass's overhead): policy/kube/fit.py reads it."""
    spec = pod.get("spec") or {}
    kept: dict[str, Any] = {
        k: spec[k] for k in ("nodeSelector", "tolerations", "overhead") if k in spec
    }
    for key in ("initContainers", "containers"):
        if key in spec:
            kept[key] = [
                {k: c[k] for k in ("name", "restartPolicy", "resources") if k in c}
                for c in spec[key]
            ]
    return kept


# kubectl's copy of the whole object as last applied (client-side apply only).
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def trim_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job without the API server's bookkeeping: its managedFields and kubectl's
    last-applied copy of it, which nothing here reads and which outweigh the rest of a
    job's metadata (the operator holds every job in its namespaces)."""
    meta = {k: v for k, v in job["metadata"].items() if k != "managedFields"}
    annotations = meta.get("annotations")
    if annotations and LAST_APPLIED in annotations:
        meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return {**job, "metadata": meta}


def trim_service(service: Mapping[str, Any]) -> dict[str, Any]:
    """Keep what the controller reads of a job's Service: that it exists, and whose it is."""
    meta = service["metadata"]
    owners = [
        {"uid": ref["uid"]} for ref in meta.get("ownerReferences", []) if ref.get("controller")
    ]
    return {
        "metadata": {
            "ownerReferences": owners,
            **{k: meta[k] for k in ("name", "namespace", "uid", "labels") if k in meta},
        }
    }
