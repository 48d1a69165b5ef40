"""Whether the API server has already checked a stored job against the operator's own
rules, so that planning may skip the offline validation (api/validation.py: the CEL
rules, evaluated by cel-python, cost several milliseconds a job).

The server checks a spec against the CRD installed when the spec is written. A job was
checked against exactly the operator's rules when
- the installed CRD's schemas, CEL rules included, are the operator's own (api/crd.py),
- the job was created after the CRD last changed, and
- its spec never changed since (generation 1: an update may keep an invalid old value,
  the server's validation ratcheting).
Anything else (a CRD older or newer than the operator, a job stored before an upgrade,
an edited spec, a missing timestamp) is validated offline, as every job was before.

When the CRD last changed is read from its managedFields. An entry may have no time (a
manager whose fields another took over by force, as `helm install` then `kubectl apply
--server-side --force-conflicts` leave it): the change is then only known to be older
than the moment the operator first saw this generation of the CRD, which is used instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any


def rules_enforced_since(
    installed: Mapping[str, Any], ours: Mapping[str, Any], seen: datetime
) -> datetime | None:
    """Since when the server enforces our rules: when the installed CRD last changed, if
    its schemas are ours (None if not); `seen`, when the operator first saw this
    generation of it, if a change's time is unknown."""
    if _schemas(installed) != _schemas(ours):
        return None
    # Changes to the CRD itself, not its status (the server's own conditions).
    entries = [
        e
        for e in (installed.get("metadata") or {}).get("managedFields") or []
        if not e.get("subresource")
    ]
    times = [_time(e.get("time")) for e in entries]
    known = [t for t in times if t is not None]
    if not times or len(known) < len(times):
        return seen
    return max(known)


def checked_by_server(job: Mapping[str, Any], since: datetime | None) -> bool:
    """Whether the stored `job` passed our rules at the API server (see above)."""
    if since is None:
        return False
    meta = job.get("metadata") or {}
    created = _time(meta.get("creationTimestamp"))
    # Timestamps have whole seconds: a job of the same second as the change is checked.
    return meta.get("generation") == 1 and created is not None and created > since


def _schemas(crd: Mapping[str, Any]) -> dict[str, Any]:
    versions = (crd.get("spec") or {}).get("versions") or []
    return {v.get("name"): v.get("schema") for v in versions}


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
