"""Which ranks stopped, for a stall's message (pure): the processes whose metrics
endpoint did not answer (frozen or dead), else the ones at the lowest step (the rank a
collective waits for)."""

from __future__ import annotations

from multigpu_operator.policy.training import ProcessReport, TrainingReport

# The most ranks a message names; the others are counted.
MAX_NAMED = 8


def stopped(report: TrainingReport | None) -> tuple[ProcessReport, ...]:
    """The ranks that stopped, by rank; () when the processes were not read."""
    processes = sorted(report.processes if report else (), key=lambda p: p.rank)
    silent = tuple(p for p in processes if not p.answered)
    if silent:
        return silent
    steps = [p.step for p in processes if p.step is not None]
    if not steps:
        return ()
    lowest = min(steps)
    return tuple(p for p in processes if p.step == lowest)


def describe(report: TrainingReport | None) -> str:
    """E.g. "rank 3 (pod j-worker-1, node n2) did not answer"; "" when none is known."""
    named = stopped(report)
    if not named:
        return ""
    shown = ", ".join(_one(p) for p in named[:MAX_NAMED])
    if len(named) > MAX_NAMED:
        shown += f" and {len(named) - MAX_NAMED} more"
    if not named[0].answered:
        verb = "does" if len(named) == 1 else "do"
        return f"{shown} {verb} not answer"
    return f"lowest step {named[0].step}: {shown}"


def _one(process: ProcessReport) -> str:
    node = f", node {process.node}" if process.node else ""
    return f"rank {process.rank} (pod {process.pod}{node})"
