"""Leader election on a coordination.k8s.io Lease (pure): who may lead, and what to write.

The rules are client-go's (leaderelection.LeaderElector), which the operators around us
use: a replica may take the Lease when nobody holds it, when it holds it already, or when
the holder has not renewed it for leaseDurationSeconds as *this* replica measured it
(from when it last saw the record change, on its own monotonic clock: the replicas'
clocks may disagree). The leader renews every retry period and stops leading once it has
not renewed for the renew deadline, which is shorter than the lease duration: it stops
before anyone else may start. A leader that stops gracefully releases the Lease (no
holder), so a standby takes over at its next try instead of after the lease duration.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime


@dataclass(frozen=True)
class LeaseTimings:
    # How long a Lease not renewed stays its holder's (a standby waits this long).
    lease_duration: float = 10.0
    # A leader that has not renewed for this long stops leading (before the lease ends).
    renew_deadline: float = 7.0
    # How often a leader renews and a standby tries.
    retry_period: float = 2.0

    def check(self) -> None:
        """client-go's own constraints, with its jitter factor of 1.2."""
        if not self.lease_duration > self.renew_deadline > self.retry_period * 1.2 > 0:
            raise ValueError(
                "leader election timings must satisfy lease duration > renew deadline > "
                f"1.2 x retry period > 0; got {self.lease_duration}, {self.renew_deadline}, "
                f"{self.retry_period}"
            )


@dataclass(frozen=True)
class LeaseRecord:
    """The spec of a Lease, as the election reads and writes it."""

    holder: str  # "" when released
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int


def may_take(
    record: LeaseRecord | None,
    identity: str,
    seen_since: float,
    now: float,
) -> bool:
    """Whether `identity` may take (or keep) the Lease: `seen_since` is the monotonic time
    at which this replica first saw the record as it is now."""
    if record is None or record.holder in ("", identity):
        return True
    return now - seen_since >= record.lease_duration_seconds


def taken(
    record: LeaseRecord | None, identity: str, timings: LeaseTimings, now: datetime
) -> LeaseRecord:
    """The record that makes `identity` the holder now (a renewal if it holds it already)."""
    duration = round(timings.lease_duration)
    if record is not None and record.holder == identity:
        return replace(record, renew_time=now, lease_duration_seconds=duration)
    transitions = 0 if record is None else record.transitions + 1
    return LeaseRecord(identity, duration, now, now, transitions)


def released(record: LeaseRecord, now: datetime) -> LeaseRecord:
    """The record a leader leaves on a graceful stop: no holder, so a standby need not wait."""
    return replace(record, holder="", lease_duration_seconds=1, renew_time=now)
