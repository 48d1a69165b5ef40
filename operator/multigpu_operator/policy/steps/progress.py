"""status.progress from what the job's processes reported (pure).

A pass writes it only when the operator's budget of progress writes allows one
(TrainingReport.publish: at most every PROGRESS_READ_SECONDS per job, under a global
write budget) or when the job leaves Running, so that its last progress is kept;
any other pass leaves the previous status.progress as it was. A job that ends keeps no
ETA, and one that succeeded shows all its steps done; one that ended before any read
shows what its processes left in their termination messages (policy/training.py
final_progress). A report of another
attempt than the one the pass started with (a stale read across a restart) is ignored.
The first report of an attempt that resumed from a checkpoint also posts a Resumed Event
naming the step.
"""

from __future__ import annotations

import math
from datetime import timedelta

from multigpu_operator.api.progress import JobProgress
from multigpu_operator.api.status import TERMINAL, JobStatus, Phase
from multigpu_operator.policy.kube.conditions import Event
from multigpu_operator.policy.kube.timestamps import rfc3339
from multigpu_operator.policy.step import Observed, Outcome
from multigpu_operator.policy.training import FinalProgress, TrainingReport, final_progress

# An ETA beyond this is no estimate (and its finish time could pass datetime's range).
MAX_ETA_SECONDS = 10 * 366 * 24 * 3600
_MAX_STEP = 2**63 - 1
_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def published_progress(seen: Observed, phase: Phase) -> Outcome:
    """status.progress set from seen.training, when this pass may write it."""
    if seen.previous_phase in TERMINAL:
        return Outcome()  # a finished job: its history stays put
    report = seen.training
    started_with = seen.previous.attempt or 1
    leaving = seen.previous_phase is Phase.RUNNING and phase is not Phase.RUNNING
    if report is None or report.attempt != started_with or not (report.publish or leaving):
        # Nothing (new) to show; a job that ends now still finishes what it showed, or
        # what its processes said on exit when it ended before any read.
        if phase not in TERMINAL:
            return Outcome()
        stored = seen.previous.progress or left_on_exit(seen, started_with)
        if not stored:
            return Outcome()
        return Outcome(status=JobStatus(progress=ended(stored, phase)))
    shown = job_progress(report)
    if phase in TERMINAL:
        shown = ended(shown, phase)
    before = seen.previous.progress.resumed_step if seen.previous.progress else None
    if shown.resumed_step and shown.resumed_step != before:
        said = f"attempt {report.attempt} resumed from its checkpoint at step {shown.resumed_step}"
        return Outcome(
            status=JobStatus(progress=shown), changes=(Event("Normal", "Resumed", said),)
        )
    return Outcome(status=JobStatus(progress=shown))


def left_on_exit(seen: Observed, attempt: int) -> JobProgress | None:
    """The progress the attempt's processes left in their termination messages."""
    said = final_progress(seen.current(attempt))
    return None if said is None else exit_progress(said, seen)


def exit_progress(said: FinalProgress, seen: Observed) -> JobProgress:
    total = said.total_steps
    fields: dict[str, object] = {
        "step": min(said.step, _MAX_STEP),
        "total_steps": min(total, _MAX_STEP) if total else None,
        "epoch": said.epoch,
        "observed_time": rfc3339(seen.now),
        "summary": f"step {min(said.step, _MAX_STEP)}",
    }
    if total:
        percent = min(100, said.step * 100 // total)
        fields |= {"percent": percent, "summary": f"{percent}%"}
    return JobProgress.model_validate({k: v for k, v in fields.items() if v is not None})


def job_progress(report: TrainingReport) -> JobProgress:
    """The status's view of one report: rates and ETA derived, unknowns left out."""
    step = min(max(report.step, 0), _MAX_STEP)
    total = report.total_steps if report.total_steps and report.total_steps > 0 else None
    rate = _rate(1 / report.step_seconds) if report.step_seconds else None
    fields: dict[str, object] = {
        "step": step,
        "total_steps": min(total, _MAX_STEP) if total else None,
        "epoch": report.epoch if report.epoch is not None and report.epoch >= 0 else None,
        "samples_per_second": _rate(report.samples_per_second),
        "steps_per_second": rate,
        "resumed_step": report.resumed_step or None,
        "last_progress_time": rfc3339(report.last_change),
        "observed_time": rfc3339(report.read_at),
        "summary": f"step {step}",
    }
    if total:
        percent = min(100, step * 100 // total)
        fields |= {"percent": percent, "summary": f"{percent}%"}
        left = max(total - step, 0) / rate if rate else None
        if left is not None and left <= MAX_ETA_SECONDS:
            finish = report.read_at + timedelta(seconds=left)
            fields |= {"eta": eta_text(left), "estimated_finish_time": rfc3339(finish)}
    return JobProgress.model_validate({k: v for k, v in fields.items() if v is not None})


def ended(progress: JobProgress, phase: Phase) -> JobProgress:
    """A finished job's last progress: no estimate any more, and a job that succeeded did
    all its steps (its last report may be up to a read interval old: a short job's can say
    26%)."""
    kept = progress.model_dump(
        mode="json", by_alias=True, exclude_unset=True, exclude={"eta", "estimated_finish_time"}
    )
    if phase is Phase.SUCCEEDED and progress.total_steps:
        kept |= {"step": progress.total_steps, "percent": 100, "summary": "100%"}
    return JobProgress.model_validate(kept)


def eta_text(seconds: float) -> str:
    """A short duration: the two largest units, e.g. "1h12m", "3m05s", "2d4h", "40s"."""
    left = max(round(seconds), 0)
    if left < 60:
        return f"{left}s"
    parts: list[str] = []
    for unit, size in _UNITS:
        if left >= size or parts:
            amount, left = divmod(left, size)
            parts.append(f"{amount:02d}{unit}" if parts else f"{amount}{unit}")
        if len(parts) == 2:
            break
    return "".join(parts)


def _rate(value: float | None) -> float | None:
    """A rate fit for the status: finite, not negative, 4 significant digits."""
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return float(f"{value:.4g}")
