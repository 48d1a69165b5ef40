"""The Lease of leader election (coordination.k8s.io/v1), read and written with optimistic
concurrency: a write names the resourceVersion it read, so two replicas can never both
think their write made them the holder."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client

from multigpu_operator.cluster.answers import domain_errors
from multigpu_operator.cluster.errors import NotFound, from_status
from multigpu_operator.leadership import LeaseRecord
from multigpu_operator.metrics import API_REQUESTS

MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass
class Leases:
    api: client.ApiClient
    namespace: str
    name: str

    def __post_init__(self) -> None:
        self._coordination = client.CoordinationV1Api(self.api)

    async def read(self) -> tuple[LeaseRecord | None, str | None]:
        """The record and its resourceVersion; (None, None) if the Lease does not exist."""
        API_REQUESTS.labels("get", "leases").inc()
        try:
            with domain_errors():
                resp = await self._coordination.read_namespaced_lease(
                    self.name, self.namespace, _preload_content=False
                )
                lease = await _answer(resp)
        except NotFound:
            return None, None
        return _record(lease.get("spec") or {}), lease["metadata"]["resourceVersion"]

    async def write(self, record: LeaseRecord, resource_version: str | None) -> str:
        """Create the Lease (no version) or replace the version read; a Conflict means
        another replica wrote first. Returns the new resourceVersion."""
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": _spec(record),
        }
        with domain_errors():
            if resource_version is None:
                API_REQUESTS.labels("create", "leases").inc()
                resp = await self._coordination.create_namespaced_lease(
                    self.namespace, body, _preload_content=False
                )
            else:
                API_REQUESTS.labels("update", "leases").inc()
                body["metadata"]["resourceVersion"] = resource_version
                resp = await self._coordination.replace_namespaced_lease(
                    self.name, self.namespace, body, _preload_content=False
                )
            written = await _answer(resp)
        return str(written["metadata"]["resourceVersion"])


async def _answer(resp: Any) -> dict[str, Any]:
    """The response's JSON, or the domain error for the server's refusal: the client
    raises none for a response it does not read itself (_preload_content=False)."""
    body: dict[str, Any] = await resp.json()
    if not 200 <= resp.status < 300:
        raise from_status(resp.status, str(body.get("message", resp.reason)))
    return body


def _spec(record: LeaseRecord) -> dict[str, Any]:
    def time(value: datetime | None) -> str | None:
        return value.astimezone(UTC).strftime(MICRO_TIME) if value else None

    return {
        "holderIdentity": record.holder,
        "leaseDurationSeconds": record.lease_duration_seconds,
        "acquireTime": time(record.acquire_time),
        "renewTime": time(record.renew_time),
        "leaseTransitions": record.transitions,
    }


def _record(spec: dict[str, Any]) -> LeaseRecord:
    def time(value: Any) -> datetime | None:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None

    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=time(spec.get("acquireTime")),
        renew_time=time(spec.get("renewTime")),
        transitions=int(spec.get("leaseTransitions") or 0),
    )
