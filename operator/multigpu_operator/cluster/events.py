"""The events.k8s.io/v1 Event the operator posts on a job, within the API's limits.

The API server refuses (422) an Event whose note is over 1024 bytes (bytes of UTF-8, not
characters), whose reason, action, reportingController or reportingInstance is over 128
characters, or whose name is not a DNS subdomain of at most 253 characters. Messages
quote pods, images and the kubelet, so any of them can be long: each is cut to fit here,
and an Event is never refused for its size.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from multigpu_operator.api.spec import API_VERSION, GROUP, KIND

NOTE_MAX_BYTES = 1024
FIELD_MAX_CHARS = 128  # reason, action, reportingController, reportingInstance
NAME_MAX_CHARS = 253
_SUFFIX_CHARS = 12  # random hex after the job's name: one Event per post
_CUT = "..."


def event_body(
    job: Mapping[str, Any], type_: str, reason: str, message: str, now: datetime, instance: str
) -> dict[str, Any]:
    """The Event `reason: message` about `job`, posted at `now` by `instance`."""
    meta = job["metadata"]
    reason = reason[:FIELD_MAX_CHARS]
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": event_name(meta["name"], uuid.uuid4().hex[:_SUFFIX_CHARS])},
        # eventTime is a MicroTime: the API server requires the six fraction digits that
        # the status timestamps (policy/kube/timestamps.py, whole seconds) do not have.
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": f"{GROUP}/operator",
        "reportingInstance": instance[:FIELD_MAX_CHARS],
        "action": reason,
        "reason": reason,
        "note": cut_to_bytes(message, NOTE_MAX_BYTES),
        "type": type_,
        "regarding": {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid", ""),
        },
    }


def event_name(job_name: str, suffix: str) -> str:
    """`<job>.<suffix>`, the job's name shortened to keep the whole a DNS subdomain."""
    room = NAME_MAX_CHARS - len(suffix) - 1
    # A cut name must still end in an alphanumeric character, as every DNS label does.
    prefix = job_name[:room].rstrip("-.") if len(job_name) > room else job_name
    return f"{prefix}.{suffix}"


def cut_to_bytes(text: str, limit: int) -> str:
    """`text` if its UTF-8 encoding fits in `limit` bytes, else its longest prefix that
    does with "..." (never half a character)."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - len(_CUT)].decode(errors="ignore") + _CUT
