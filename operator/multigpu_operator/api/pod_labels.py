"""What a pod's labels (api/names.py) say about it: the attempt that created it and its
replica index, read one way by everyone (the operator's steps, the client, `mgj`).

A missing label has one meaning: a pod without the attempt label is of attempt 1 (pods
made before the label existed were all of a job's first attempt, and a new job's attempt
is 1); a pod without the replica-index label has index UNKNOWN_REPLICA (-1), which no
planned pod has. A value that is not a whole number reads as if it were missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from multigpu_operator.api.names import LABEL_ATTEMPT, LABEL_REPLICA_INDEX

FIRST_ATTEMPT = 1
UNKNOWN_REPLICA = -1

Pod = Mapping[str, Any]


def attempt_of(pod: Pod) -> int:
    """The attempt that created the pod; FIRST_ATTEMPT (1) when its label is missing."""
    return _int_label(pod, LABEL_ATTEMPT, FIRST_ATTEMPT)


def replica_index(pod: Pod) -> int:
    """The pod's replica index; UNKNOWN_REPLICA (-1) when its label is missing."""
    return _int_label(pod, LABEL_REPLICA_INDEX, UNKNOWN_REPLICA)


def with_attempt(pod: Pod, attempt: int) -> dict[str, Any]:
    """The pod labelled as made by `attempt`."""
    meta = pod["metadata"]
    labels = {**(meta.get("labels") or {}), LABEL_ATTEMPT: str(attempt)}
    return {**pod, "metadata": {**meta, "labels": labels}}


def _int_label(pod: Pod, key: str, missing: int) -> int:
    value = str(((pod.get("metadata") or {}).get("labels") or {}).get(key, ""))
    return int(value) if value.isdigit() else missing
