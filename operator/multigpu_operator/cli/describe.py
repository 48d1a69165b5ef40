"""`mgj describe JOB`: one screen on a job: its phase and why it waits (the conditions'
reasons and messages), its placement by topology, the last failure, its attempts and its
Events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from multigpu_operator.api.placement import level_name
from multigpu_operator.api.status import JobStatus
from multigpu_operator.cli.show import show_job

if TYPE_CHECKING:
    from multigpu_operator.client import Client, JobView

# Events beyond these, the oldest, are left out: one screen.
MAX_EVENTS = 10


def describe(client: Client, name: str) -> str:
    view = client.get(name)
    return show_job(view) + details(view, client.events(name))


def details(view: JobView, events: list[dict[str, Any]]) -> str:
    status = view.status
    lines = ["Conditions:"] + (conditions(status) or ["  none"])
    lines += placement(status)
    failure = status.last_failure
    if failure:
        where = f" on {failure.node}" if failure.node else ""
        code = f", exit code {failure.exit_code}" if failure.exit_code is not None else ""
        lines.append(
            f"Last failure: attempt {failure.attempt or '?'}, pod {failure.pod or '?'}"
            f" (replica {failure.replica_index}){where}: {failure.reason or 'unknown'}{code}"
        )
    for attempt in status.attempts or []:
        ended = f"ended: {attempt.reason or 'unknown'}" if attempt.end_time else "running"
        lines.append(f"Attempt {attempt.attempt}: {ended}")
    lines.append("Events:" if events else "Events:    none")
    lines += [f"  {event_line(e)}" for e in events[-MAX_EVENTS:]]
    return "\n".join(lines) + "\n"


def placement(status: JobStatus) -> list[str]:
    """Where spec.placement put the pods: the level, the domains in rank order with their
    replica indexes, and the domains given up."""
    placed = status.placement
    if placed is None:
        return []
    level = level_name(placed.topology_key)
    lines = [f"Placement: {level} ({placed.topology_key})"]
    first = 0
    for domain in placed.domains or []:
        last = first + domain.pods - 1
        pods = f"{domain.pods} pod{'' if domain.pods == 1 else 's'}"
        indexes = f"replica {first}" if first == last else f"replicas {first}-{last}"
        lines.append(f"  {domain.name}: {pods} ({indexes})")
        first += domain.pods
    if not placed.domains:
        lines.append("  no domain chosen")
    if placed.tried:
        lines.append(f"  tried before: {', '.join(placed.tried)}")
    return lines


def conditions(status: JobStatus) -> list[str]:
    out = []
    for c in status.conditions or []:
        why = f" {c.reason}" if c.reason else ""
        said = f": {c.message}" if c.message else ""
        out.append(f"  {c.type}={c.status}{why}{said}")
    return out


def event_line(event: Mapping[str, Any]) -> str:
    """One Event (events.k8s.io/v1, as the client reads them), repeats counted."""
    series = event.get("series") or {}
    count = int(series.get("count") or event.get("deprecatedCount") or 1)
    times = f" (x{count})" if count > 1 else ""
    kind = event.get("type") or "Normal"
    # A space after each column: a reason of 20 letters or more must not run into the text.
    return f"{kind:<7} {event.get('reason') or '-':<20} {event.get('note') or ''}{times}"
