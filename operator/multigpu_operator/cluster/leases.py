"""The Lease of leader election (coordination.k8s.io/v1), read and written with optimistic
concurrency: a write names the resourceVersion it read, so two replicas can never both
think their write made them the holder."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from multigpu_operator.cluster.errors import Conflict, NotFound
from multigpu_operator.cluster.kinds import LEASES
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.election.lease_rules import LeaseRecord

MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass
class Leases:
    cluster: Cluster
    namespace: str
    name: str

    async def read(self) -> tuple[LeaseRecord | None, str | None]:
        """The record and its resourceVersion; (None, None) if the Lease does not exist."""
        try:
            lease = await self.cluster.get(LEASES, self.namespace, self.name)
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
        if resource_version is None:
            created = await self.cluster.create(LEASES, self.namespace, body)
            if created is None:
                raise Conflict(f'leases "{self.name}" already exists', 409)
            return str(created["metadata"]["resourceVersion"])
        body["metadata"]["resourceVersion"] = resource_version
        written = await self.cluster.replace(LEASES, body)
        return str(written["metadata"]["resourceVersion"])


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
