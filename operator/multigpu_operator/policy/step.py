"""The shapes of a reconcile pass (pure): what a step sees, the counters it may move, the
outcome it returns, and what the whole pass decides.

decide() (reconcile.py) runs the steps in order. Each gets the same read-only snapshot of
the job (Observed) and the counters as the steps before it left them (Progress), and
returns an Outcome; decide() merges the outcomes in order and stops at the first that
ends the pass. No step changes anything another step holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from multigpu_operator.api.pod_labels import attempt_of
from multigpu_operator.api.spec import Job, Mode
from multigpu_operator.api.status import ConditionType, JobStatus, Phase, RuleRestarts
from multigpu_operator.plan import DesiredState
from multigpu_operator.policy.kube.conditions import ConditionChange, Event
from multigpu_operator.policy.kube.kueue_admission import Admission
from multigpu_operator.policy.kube.pods import being_deleted
from multigpu_operator.policy.placement.placed import Placed
from multigpu_operator.policy.training import TrainingReport

Pod = Mapping[str, Any]


@dataclass(frozen=True)
class Observed:
    """One job as this pass sees it: never changed by a step."""

    job: Job
    desired: DesiredState
    pods: tuple[Pod, ...]  # the job's pods as the cache has them, being deleted or not
    previous: JobStatus  # the status written before this pass, read once
    now: datetime
    # The cluster's nodes, trimmed (cluster/nodes.py); empty when not known.
    nodes: tuple[Mapping[str, Any], ...] = ()
    # Where the job stands in Kueue; None when it is not queued there (policy/steps/queueing.py).
    admission: Admission | None = None
    # Why the pods cannot run where Kueue admitted them ("" when they can).
    unplaceable: str = ""
    # The nodes new pods are kept off, and a line saying which or why none
    # (policy/failures/avoidance.py; "" when no node is to be avoided).
    avoided: tuple[str, ...] = ()
    avoidance: str = ""
    # Where spec.placement puts the pods this pass (policy/placement/placed.py); None
    # without spec.placement, or while Kueue places the job.
    placement: Placed | None = None
    # What the job's processes last reported (controller/progress_board.py); None when
    # nothing was read yet or the job does not report.
    training: TrainingReport | None = None
    # The job's pods deleted for a fault, as the watch last showed them (cluster/informer.py
    # PodInformer.gone_of): Kubernetes may mark a pod Failed and delete it at once (PodGC
    # after its node is removed), before any pass saw it Failed.
    gone: tuple[Pod, ...] = ()
    # Read once from the above (a pass reads them many times):
    live: tuple[Pod, ...] = field(init=False)  # pods not being deleted
    elastic: bool = field(init=False)
    previous_phase: Phase | None = field(init=False)
    # Each live pod with the attempt that created it.
    _by_attempt: tuple[tuple[int, Pod], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        live = tuple(p for p in self.pods if not being_deleted(p))
        object.__setattr__(self, "live", live)
        object.__setattr__(self, "elastic", self.job.spec.mode is Mode.ELASTIC)
        object.__setattr__(self, "previous_phase", self.previous.phase)
        object.__setattr__(self, "_by_attempt", tuple((attempt_of(p), p) for p in live))

    def had_condition(self, ctype: ConditionType) -> bool:
        """Whether the previous status has this condition, True or False."""
        return self.previous.condition(ctype) is not None

    def current(self, attempt: int) -> tuple[Pod, ...]:
        """Live pods of `attempt`. Elastic: every live pod up to it is a member; pods of a
        newer attempt (seen through a stale status) are never touched."""
        if self.elastic:
            return self.up_to(attempt)
        return tuple(p for a, p in self._by_attempt if a == attempt)

    def up_to(self, attempt: int) -> tuple[Pod, ...]:
        """Live pods of `attempt` and the attempts before it."""
        return tuple(p for a, p in self._by_attempt if a <= attempt)

    def older(self, attempt: int) -> tuple[Pod, ...]:
        """Live pods of the attempts before `attempt`."""
        return tuple(p for a, p in self._by_attempt if a < attempt)


@dataclass(frozen=True)
class Progress:
    """The counters that steps move and later steps read."""

    attempt: int
    restarts: int  # counted against runPolicy.backoffLimit
    start: datetime  # when runPolicy.activeDeadlineSeconds started counting
    # Restarts after infrastructure faults (runPolicy.infrastructureRetries).
    infrastructure_restarts: int = 0
    # (index, restarts) of each failure-policy rule with maxRestarts that fired.
    rule_restarts: tuple[tuple[int, int], ...] = ()
    # Restarts decided in this pass, counted or not (Decision.restarts, the metric).
    restarted: int = 0

    @classmethod
    def from_status(cls, previous: JobStatus, now: datetime) -> Progress:
        """The counters as the previous status left them (an empty status: attempt 1)."""
        return cls(
            attempt=previous.attempt or 1,
            restarts=previous.restarts or 0,
            start=previous.start_time or now,
            infrastructure_restarts=previous.infrastructure_restarts or 0,
            rule_restarts=tuple((r.index, r.restarts) for r in previous.rule_restarts or ()),
        )

    def resumed(self, seen: Observed) -> Progress:
        """The counters of a job resumed (spec.suspend false, or admitted by Kueue): a
        fresh attempt if the current one created its pods (a job created suspended starts
        attempt 1), not counted as a restart; activeDeadlineSeconds counts from now."""
        fresh = seen.previous.created_attempt == self.attempt
        return replace(self, attempt=self.attempt + fresh, start=seen.now)

    def restart_counters(self) -> JobStatus:
        """The restart counters as status fields, the one conversion back (only those in
        use: a field set to nothing would be written as null)."""
        moved: dict[str, object] = {"restarts": self.restarts}
        if self.infrastructure_restarts:
            moved["infrastructure_restarts"] = self.infrastructure_restarts
        if self.rule_restarts:
            moved["rule_restarts"] = [
                RuleRestarts(index=i, restarts=n) for i, n in self.rule_restarts
            ]
        return JobStatus.model_validate(moved)


# The status of an outcome that sets none, shared: a pass makes a dozen outcomes, and a
# JobStatus is validated when built. Statuses are never changed in place (merged copies).
NO_STATUS = JobStatus()


@dataclass(frozen=True)
class Outcome:
    """What one step decided; every field is optional."""

    status: JobStatus = field(default_factory=lambda: NO_STATUS)  # the status fields to set
    # Condition changes and events, in the order decided.
    changes: tuple[ConditionChange | Event, ...] = ()
    delete_pods: tuple[str, ...] = ()
    create_pods: tuple[dict[str, Any], ...] = ()
    wake_after: tuple[float, ...] = ()  # seconds until a timer of this step is due
    delete_job: bool = False
    progress: Progress | None = None  # the counters, if this step moved them
    stop: Phase | None = None  # the pass ends here, in this phase

    def then(self, later: Outcome) -> Outcome:
        """This outcome followed by a later step's."""
        return merged((self, later))


def merged(outcomes: Sequence[Outcome]) -> Outcome:
    """Outcomes in the order they were decided, as one: later status fields, counters and
    stop win; everything else is kept in order."""
    status = NO_STATUS
    changes: list[ConditionChange | Event] = []
    delete_pods: list[str] = []
    create_pods: list[dict[str, Any]] = []
    wake_after: list[float] = []
    delete_job, progress, stop = False, None, None
    for outcome in outcomes:
        status = status.merged(outcome.status)
        changes += outcome.changes
        delete_pods += outcome.delete_pods
        create_pods += outcome.create_pods
        wake_after += outcome.wake_after
        delete_job = delete_job or outcome.delete_job
        progress = outcome.progress or progress
        stop = outcome.stop or stop
    return Outcome(
        status,
        tuple(changes),
        tuple(delete_pods),
        tuple(create_pods),
        tuple(wake_after),
        delete_job,
        progress,
        stop,
    )


@dataclass(frozen=True)
class Decision:
    """What one pass (reconcile.decide) decides and the actuator carries out: the status
    to write, then the pods to delete and create, and when to look again."""

    status: JobStatus
    events: tuple[Event, ...]  # posted once the status is written
    entered: Phase | None  # the phase the job entered in this pass, if it changed
    create_pods: tuple[dict[str, Any], ...] = ()
    # The headless Service to create before the pods (missing: deleted by hand, or never
    # created after a crash between the two).
    create_service: dict[str, Any] | None = None
    # (name, uid) of each pod to delete: the delete names that very pod (a name may
    # already belong to a newer one).
    deletes: tuple[tuple[str, str | None], ...] = ()
    delete_job: bool = False
    requeue_after: float | None = None  # seconds until a timer (deadline, gang, TTL) is due
    restarts: int = 0  # restarts decided in this pass, counted against a budget or not
    workload: WorkloadChange | None = None  # what to write on the job's Kueue Workload
    # The status may wait for the pods (policy/steps/status.py first_write_waits).
    status_waits: bool = False
    # Seconds the status write is held back, a change of pod counts alone (0: not held;
    # policy/steps/status.py counts_held_for).
    status_held_for: float = 0.0
    # A pass that only writes its status (a refusal accounted for: policy/steps/refusals.py;
    # a job that cannot be planned).
    only_status: bool = False
    # A pass that only writes the Kueue Workload (`workload`; a job MultiKueue runs
    # elsewhere), or nothing at all (None: another controller's job).
    only_workload: bool = False
    # The first pod to send as a server-side dry run, checking the template of a job
    # that creates no pod yet (policy/steps/template_check.py).
    dry_run_pod: dict[str, Any] | None = None
    # Why the pass cannot finish yet (a full quota, Kueue not ready): looked at again
    # after the retry backoff.
    waiting: str = ""

    @property
    def delete_pods(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.deletes)


@dataclass(frozen=True)
class WorkloadChange:
    """What to write on a queued job's Kueue Workload, after the job's status."""

    create: bool = False  # the Workload is missing: create it
    # The Workload to create, with the priority the pass read (reconcile.with_body).
    body: dict[str, Any] | None = None
    # Why it cannot be created yet (Kueue not served, its priority class missing):
    # looked at again after the retry backoff.
    waits: str = ""
    status: Mapping[str, Any] | None = None  # a merge patch of its status
    release: bool = False  # drop Kueue's resource-in-use finalizer


@dataclass(frozen=True)
class StatusUpdate:
    """A status and the events that follow its write (policy/failures/fail.py's invalid_job)."""

    status: JobStatus
    events: tuple[Event, ...]
    entered: Phase | None  # the phase the job entered with this update, if it changed
