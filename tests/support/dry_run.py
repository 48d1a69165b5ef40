"""A job created with a server-side dry run: what the API server would store, or the
lines of its refusal ("<field>: <message>", or `unknown field "<field>"`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from multigpu_operator.api.spec import GROUP, PLURAL, VERSION

# A strict decoding error lists every unknown field in one message.
_UNKNOWN_FIELD = re.compile(r'unknown field "(?:[^"\\]|\\.)*"')


@dataclass(frozen=True)
class Answer:
    stored: dict[str, Any] | None  # the object as the server would store it; None if refused
    lines: list[str]  # the refusal, one line per error ("<field>: <message>")


def dry_run_create(api: client.ApiClient, namespace: str, manifest: dict[str, Any]) -> Answer:
    """Create `manifest` as `kubectl create --dry-run=server` does (strict fields)."""
    try:
        stored = client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, manifest, field_validation="Strict", dry_run="All"
        )
    except ApiException as err:
        return Answer(None, refusal_lines(err))
    return Answer(stored, [])


def refusal_lines(err: ApiException) -> list[str]:
    """The lines of a 422 (one per cause) or of a strict decoding error (400)."""
    body = json.loads(err.body)
    if err.status == 400:
        return _UNKNOWN_FIELD.findall(body["message"]) or [body["message"]]
    causes = body.get("details", {}).get("causes") or []
    return [f"{c.get('field')}: {c.get('message')}" for c in causes] or [body["message"]]
