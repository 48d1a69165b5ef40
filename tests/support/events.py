"""Reading Events as plain data (the typed client rejects Events with no eventTime,
which is how core/v1 Events posted by other components look through events.k8s.io)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client


def list_events(api_client: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    resp = client.EventsV1Api(api_client).list_namespaced_event(namespace, _preload_content=False)
    items: list[dict[str, Any]] = json.loads(resp.data)["items"]
    return items
