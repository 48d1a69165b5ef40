"""How `mgj get` and `mgj wait` show a job: one job's screen, the table of jobs, the
status line (pure: views in, text out)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from multigpu_operator.api.status import JobStatus

if TYPE_CHECKING:
    from multigpu_operator.client import JobView


def show_job(view: JobView) -> str:
    status = view.status
    lines = [
        f"Job:       {view.name} (namespace {view.namespace})",
        f"Phase:     {status.phase or 'new'}" + (f" ({status.reason})" if status.reason else ""),
        f"Attempt:   {status.attempt or 1}    Restarts: {status.restarts or 0}",
    ]
    if view.runtime:
        copy = status.runtime
        kept = f" (its generation {copy.generation} kept)" if copy and copy.generation else ""
        lines.append(f"Runtime:   {view.runtime}{kept}")
    if status.progress is not None:
        lines.append(f"Progress:  {progress_text(status)}")
    if view.pods:
        lines.append("Pods:")
        lines += [
            f"  r{p.replica:<3} {p.name:<30} {p.node or '-':<20} {p.state}" for p in view.pods
        ]
    else:
        lines.append("Pods:      none")
    return "\n".join(lines) + "\n"


def job_table(views: list[JobView], now: datetime) -> str:
    rows = [("NAME", "PHASE", "ATTEMPT", "PROGRESS", "ETA", "RUNTIME", "AGE")] + [
        (
            v.name,
            str(v.phase or "-"),
            str(v.status.attempt or "-"),
            (v.status.progress.summary or "-") if v.status.progress else "-",
            (v.status.progress.eta or "-") if v.status.progress else "-",
            v.runtime.split()[-1] if v.runtime else "-",
            _age(v.created, now),
        )
        for v in views
    ]
    width = max(len(r[0]) for r in rows) + 2
    runtime = max(len(r[5]) for r in rows) + 2
    return "".join(
        f"{r[0]:<{width}}{r[1]:<12}{r[2]:<9}{r[3]:<12}{r[4]:<9}{r[5]:<{runtime}}{r[6]}\n"
        for r in rows
    )


def progress_text(status: JobStatus) -> str:
    """E.g. "42% (step 1200 of 2876, ETA 1h12m)", "step 1200"; "" when none is known."""
    shown = status.progress
    if shown is None:
        return ""
    summary = shown.summary or f"step {shown.step}"
    if not shown.total_steps:
        return summary
    eta = f", ETA {shown.eta}" if shown.eta else ""
    return f"{summary} (step {shown.step} of {shown.total_steps}{eta})"


def status_line(name: str, status: JobStatus) -> str:
    pods = status.pods
    running = f", {pods.running or 0}/{status.replicas or '?'} pods running" if pods else ""
    why = f" ({status.reason})" if status.reason else ""
    done = f", {progress_text(status)}" if status.progress else ""
    return f"{name}: {status.phase or 'new'}{why}, attempt {status.attempt or 1}{running}{done}"


def _age(created: str | None, now: datetime) -> str:
    if not created:
        return "-"
    seconds = int((now - datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"
