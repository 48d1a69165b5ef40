"""Reading Events as plain data (the typed client rejects Events with no eventTime,
which is how core/v1 Events posted by other components look through events.k8s.io)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from support.waiting import wait_for


def list_events(api_client: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    resp = client.EventsV1Api(api_client).list_namespaced_event(namespace, _preload_content=False)
    items: list[dict[str, Any]] = json.loads(resp.data)["items"]
    return items


def wait_event(
    api_client: client.ApiClient,
    namespace: str,
    reason: str,
    regarding: str | None = None,
    type_: str | None = None,
) -> dict[str, Any]:
    """The first Event with `reason` (about object `regarding`, of `type_`, when given),
    waited for: the operator posts a job's Event after the status write a test has just
    seen, and a kubelet posts its own in the background."""

    def found() -> dict[str, Any] | None:
        for e in list_events(api_client, namespace):
            if (
                e.get("reason") == reason
                and regarding in (None, e.get("regarding", {}).get("name"))
                and type_ in (None, e.get("type"))
            ):
                return e
        return None

    about = f" about {regarding}" if regarding else ""
    return wait_for(found, f"the {reason} Event{about}")
