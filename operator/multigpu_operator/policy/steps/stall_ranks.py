"""Which ranks stopped, for a stall's message (pure): the processes whose metrics
endpoint did not answer (frozen or dead), else the ones not in a checkpoint the others
wait in, else the ones at the lowest step (the rank a collective waits for)."""

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
    if any(p.checkpointing for p in processes):
        missing = tuple(p for p in processes if not p.checkpointing)
        if missing:
            return missing
    steps = [p.step for p in processes if p.step is not None]
    if not steps:
        return ()
    lowest = min(steps)
    return tuple(p for p in processes if p.step == lowest)


def describe(report: TrainingReport | None) -> str:
    """E.g. "rank 3 (pod j-worker-1, node n2) did not answer"; "" when none is known."""
    named = stopped(report)
    if not named or report is None:
        return ""
    shown = ", ".join(_one(p) for p in named[:MAX_NAMED])
    if len(named) > MAX_NAMED:
        shown += f" and {len(named) - MAX_NAMED} more"
    verb = "does" if len(named) == 1 else "do"
    if not named[0].answered:
        return f"{shown} {verb} not answer"
    if any(p.checkpointing for p in report.processes):
        return f"{shown} {verb} not reach the checkpoint the others wait in"
    return f"lowest step {named[0].step}: {shown}"


def _one(process: ProcessReport) -> str:
    node = f", node {process.node}" if process.node else ""
    return f"rank {process.rank} (pod {process.pod}{node})"
