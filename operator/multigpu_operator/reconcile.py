"""One reconcile pass (pure): a job, its desired pods, its observed pods, its previous
status and the time -> the new status, the pods to create and delete, and when to look
again. docs/lifecycle.md describes these rules for users.

Level-triggered: the result depends only on what exists now and on the status written
before, never on what the operator remembers, so a restart at any point finishes what
was started. Counters (attempt, restarts) are written to the status before any pod is
touched, and pods carry the attempt that created them: pods of an older attempt are
deleted, pods of a newer one (seen through a stale cache) are never touched, and a name
is reused only once its previous pod is gone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from multigpu_operator.api import names
from multigpu_operator.api.lifecycle import (
    BelowMinAction,
    GangTimeoutAction,
    RestartPolicy,
)
from multigpu_operator.api.spec import Job, Mode
from multigpu_operator.plan import DesiredState
from multigpu_operator.policy.cleanup import pods_to_clean, ttl_due
from multigpu_operator.policy.conditions import Conditions, ConditionType
from multigpu_operator.policy.decision import Decision
from multigpu_operator.policy.gang import scheduling
from multigpu_operator.policy.pods import attempt_of, replica_index, with_attempt
from multigpu_operator.policy.status import (
    TERMINAL,
    Failure,
    Phase,
    count_pods,
    failures,
    lost_pod,
)
from multigpu_operator.policy.timestamps import parse_time, rfc3339

# Status fields that describe a wait in progress: dropped unless this pass re-sets them.
_TRANSIENT = ("unscheduledSince", "belowMinSince", "requeueAt", "countedFailures")


def decide(
    job: Job,
    desired: DesiredState,
    pods: Sequence[Mapping[str, Any]],
    previous: Mapping[str, Any],
    now: datetime,
) -> Decision:
    return _Pass(job, desired, pods, previous, now).run()


class _Pass:
    def __init__(
        self,
        job: Job,
        desired: DesiredState,
        pods: Sequence[Mapping[str, Any]],
        previous: Mapping[str, Any],
        now: datetime,
    ) -> None:
        self.job, self.spec, self.desired, self.now = job, job.spec, desired, now
        self.previous = previous
        self.prev_phase = Phase(previous["phase"]) if previous.get("phase") else None
        self.cond = Conditions(previous, job.generation, rfc3339(now))
        self.status = {k: v for k, v in previous.items() if k not in _TRANSIENT}
        self.attempt = int(previous.get("attempt", 1))
        self.restarts = int(previous.get("restarts", 0))
        self.start = parse_time(previous.get("startTime")) or now
        self.pods = list(pods)
        self.live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        self.elastic = job.spec.mode is Mode.ELASTIC
        self.deletes: list[str] = []
        self.creates: list[dict[str, Any]] = []
        self.wake: list[float] = []
        self.added_restarts = 0
        self.delete_job = False

    # The pass ------------------------------------------------------------------------

    def run(self) -> Decision:
        if self.prev_phase in TERMINAL:
            return self._finished(self.prev_phase)
        if self.spec.suspend:
            return self._suspend()
        if self.prev_phase is Phase.SUSPENDED:
            self._resume()
        deadline = self.spec.run_policy.active_deadline_seconds
        if deadline is not None:
            left = (self.start + timedelta(seconds=deadline) - self.now).total_seconds()
            if left <= 0:
                return self._fail(
                    "DeadlineExceeded",
                    f"the job ran longer than runPolicy.activeDeadlineSeconds ({deadline}s)",
                )
            self.wake.append(left)
        if self._waiting_to_requeue():
            return self._done(Phase.PENDING)
        self.deletes += [p["metadata"]["name"] for p in self.live if attempt_of(p) < self.attempt]
        failed = self._elastic_failures() if self.elastic else self._attempt_failure()
        if failed is not None:
            return failed
        gang = self._gang()
        if gang is not None:
            return gang
        if self.elastic:
            below = self._below_min()
            if below is not None:
                return below
            self._scale()
        taken = {p["metadata"]["name"] for p in self.pods}
        self.creates = [
            with_attempt(p, self.attempt)
            for p in self.desired.pods
            if p["metadata"]["name"] not in taken
        ]
        phase = self._phase()
        return self._finished(phase) if phase in TERMINAL else self._done(phase)

    def _current(self) -> list[Mapping[str, Any]]:
        """Live pods of the current attempt (Elastic: every live pod is a member)."""
        if self.elastic:
            return [p for p in self.live if attempt_of(p) <= self.attempt]
        return [p for p in self.live if attempt_of(p) == self.attempt]

    # Suspend, requeue ----------------------------------------------------------------

    def _suspend(self) -> Decision:
        self.deletes += [p["metadata"]["name"] for p in self.live if attempt_of(p) <= self.attempt]
        msg = "spec.suspend is true: the job's pods are deleted until it is resumed"
        self.cond.set(ConditionType.SUSPENDED, True, "Suspended", msg)
        self.cond.clear(ConditionType.RUNNING, "Suspended", msg)
        return self._done(Phase.SUSPENDED)

    def _resume(self) -> None:
        if self.previous.get("createdAttempt") == self.attempt:
            self.attempt += 1  # a fresh attempt, not a restart
        msg = f"spec.suspend is false: starting attempt {self.attempt}"
        self.cond.set(ConditionType.SUSPENDED, False, "Resumed", msg)
        self.cond.event("Normal", "Resumed", msg)
        self.start = self.now  # activeDeadlineSeconds counts from the resume

    def _waiting_to_requeue(self) -> bool:
        at = parse_time(self.previous.get("requeueAt"))
        if at is None:
            return False
        if self.now < at:
            self.status["requeueAt"] = self.previous["requeueAt"]
            self.deletes += [p["metadata"]["name"] for p in self._current()]
            self.wake.append((at - self.now).total_seconds())
            return True
        self.attempt += 1  # a fresh attempt, not a restart
        self.cond.event(
            "Normal", "Requeued", f"gang timeout passed: starting attempt {self.attempt}"
        )
        return False

    # Failures ------------------------------------------------------------------------

    def _attempt_failure(self) -> Decision | None:
        """One failed (or lost) rank breaks the collective: the attempt is over."""
        current = self._current()
        found = failures(current)
        if not found and self.previous.get("createdAttempt") == self.attempt:
            present = {p["metadata"]["name"] for p in current}
            found = [
                lost_pod(p["metadata"]["name"], i)
                for i, p in enumerate(self.desired.pods)
                if p["metadata"]["name"] not in present
            ][:1]
        if not found:
            return None
        failure = found[0]
        if not self._may_retry(failure):
            return self._give_up(failure)
        self.restarts += 1
        self.added_restarts += 1
        self.attempt += 1
        limit = self.spec.run_policy.backoff_limit
        msg = f"starting attempt {self.attempt} of {limit + 1}: {failure.message()}"
        self.status["lastFailure"] = failure.as_status(self.attempt - 1)
        self.cond.set(ConditionType.RESTARTING, True, "PodFailed", msg, always_event=True)
        self.cond.clear(ConditionType.RUNNING, "Restarting", msg)
        self.deletes += [p["metadata"]["name"] for p in self.live if attempt_of(p) < self.attempt]
        return self._done(Phase.RESTARTING)

    def _elastic_failures(self) -> Decision | None:
        """Only the failed pod is replaced; torchrun re-forms the group around it."""
        found = failures(self._current())
        counted = set(self.previous.get("countedFailures", []))
        limit = self.spec.run_policy.backoff_limit
        for failure in found:
            if failure.uid in counted or failure.disrupted:
                continue  # a lost node or an eviction is replaced, not counted
            if not self._may_retry(failure):
                return self._give_up(failure)
            self.restarts += 1
            self.added_restarts += 1
            counted.add(failure.uid)
            self.status["lastFailure"] = failure.as_status(self.attempt)
            msg = f"replacing {failure.message()} (restart {self.restarts} of {limit})"
            self.cond.set(ConditionType.RESTARTING, True, "PodFailed", msg, always_event=True)
        if found:
            self.status["countedFailures"] = sorted(f.uid for f in found if f.uid in counted)
            self.deletes += [f.pod for f in found]
        return None

    def _may_retry(self, failure: Failure) -> bool:
        policy = self.spec.run_policy
        return policy.retries(failure.exit_code) and self.restarts < policy.backoff_limit

    def _give_up(self, failure: Failure) -> Decision:
        policy = self.spec.run_policy
        self.status["lastFailure"] = failure.as_status(self.attempt)
        if policy.retries(failure.exit_code):
            return self._fail(
                "BackoffLimitExceeded",
                f"{self.restarts} restarts used up runPolicy.backoffLimit "
                f"({policy.backoff_limit}); last failure: {failure.message()}",
            )
        if policy.restart_policy is RestartPolicy.EXIT_CODE:
            return self._fail(
                "NonRetryableExitCode", f"{failure.message()} (not retried under ExitCode)"
            )
        return self._fail("PodFailed", failure.message())

    # Scheduling and elastic size -----------------------------------------------------

    def _gang(self) -> Decision | None:
        if self.elastic and self.previous.get("createdAttempt") and self._has_run():
            return None  # a running elastic job is governed by _below_min
        current = [
            p
            for p in self._current()
            if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
        ]
        needed = (
            self.spec.elastic.min_replicas
            if self.elastic and self.spec.elastic
            else len(self.desired.pods)
        )
        state = scheduling(current)
        if current and state.scheduled >= needed:
            if self.cond.has(ConditionType.SCHEDULED):  # only news after a wait
                msg = f"{state.scheduled} pods scheduled"
                self.cond.set(ConditionType.SCHEDULED, True, "PodsScheduled", msg)
            return None
        if state.unschedulable == 0:
            # Pods the scheduler has not looked at yet, or held by a scheduling gate
            # (queued for admission): no timer runs.
            if state.gated:
                msg = f"{state.gated} pods held by a scheduling gate (waiting for admission)"
                self.cond.set(ConditionType.SCHEDULED, False, "SchedulingGated", msg)
            return None
        since = parse_time(self.previous.get("unscheduledSince")) or self.now
        waited = (self.now - since).total_seconds()
        gang = self.spec.gang
        shortage = state.shortage(needed)
        if waited < gang.timeout_seconds:
            self.status["unscheduledSince"] = rfc3339(since)
            self.cond.set(ConditionType.SCHEDULED, False, "Unschedulable", shortage)
            self.wake.append(gang.timeout_seconds - waited)
            return None
        msg = f"after gang.timeoutSeconds ({gang.timeout_seconds}s) {shortage}"
        if gang.on_timeout is GangTimeoutAction.FAIL:
            return self._fail("GangTimeout", msg)
        if gang.on_timeout is GangTimeoutAction.WAIT:
            self.status["unscheduledSince"] = rfc3339(since)
            self.cond.set(ConditionType.SCHEDULED, False, "GangTimeout", f"{msg}; still waiting")
            return None
        at = self.now + timedelta(seconds=gang.requeue_after_seconds)
        self.status["requeueAt"] = rfc3339(at)
        self.deletes += [p["metadata"]["name"] for p in self._current()]
        self.wake.append(gang.requeue_after_seconds)
        released = f"{msg}; released its pods, retrying at {rfc3339(at)}"
        self.cond.set(ConditionType.SCHEDULED, False, "GangTimeout", released)
        return self._done(Phase.PENDING)

    def _has_run(self) -> bool:
        return any(c["type"] == ConditionType.RUNNING for c in self.previous.get("conditions", []))

    def _below_min(self) -> Decision | None:
        policy = self.spec.elastic
        if policy is None or not self._has_run():
            return None
        running = count_pods(self._current()).running
        if running >= policy.min_replicas:
            return None
        since = parse_time(self.previous.get("belowMinSince")) or self.now
        waited = (self.now - since).total_seconds()
        msg = f"{running} of at least elastic.minReplicas ({policy.min_replicas}) pods running"
        if waited >= policy.below_min_timeout_seconds:
            if policy.on_below_min is BelowMinAction.FAIL:
                return self._fail(
                    "BelowMinReplicas", f"{msg} for {policy.below_min_timeout_seconds}s"
                )
            msg += "; waiting for capacity"
        else:
            self.wake.append(policy.below_min_timeout_seconds - waited)
        self.status["belowMinSince"] = rfc3339(since)
        self.cond.clear(ConditionType.RUNNING, "BelowMinReplicas", msg)
        return None

    def _scale(self) -> None:
        """Elastic: pods above spec.replicas go, highest index first."""
        target = len(self.desired.pods)
        extra = sorted(
            (p for p in self.live if replica_index(p) >= target), key=replica_index, reverse=True
        )
        self.deletes += [p["metadata"]["name"] for p in extra]
        before = self.previous.get("targetReplicas")
        if before is not None and before != target:
            self.cond.event("Normal", "Scaled", f"scaled from {before} to {target} pods")
        self.status["targetReplicas"] = target

    # Phase and status ----------------------------------------------------------------

    def _phase(self) -> Phase:
        counts = count_pods(self._current())
        expected = len(self.desired.pods)
        if self.elastic and self.spec.elastic:
            if counts.succeeded and not counts.running:
                return Phase.SUCCEEDED
            if counts.running >= self.spec.elastic.min_replicas:
                return Phase.RUNNING
        elif counts.succeeded >= expected:
            return Phase.SUCCEEDED
        elif counts.running + counts.succeeded >= expected:
            return Phase.RUNNING
        return Phase.RESTARTING if self.prev_phase is Phase.RESTARTING else Phase.PENDING

    def _fail(self, reason: str, message: str) -> Decision:
        self.cond.clear(ConditionType.RUNNING, reason, message)
        self.cond.clear(ConditionType.RESTARTING, reason, message)
        self.cond.set(ConditionType.FAILED, True, reason, message)
        return self._finished(Phase.FAILED)

    def _finished(self, phase: Phase) -> Decision:
        completion = parse_time(self.previous.get("completionTime")) or self.now
        self.status["completionTime"] = rfc3339(completion)
        self.deletes += pods_to_clean(self.live, self.spec.run_policy.clean_pod_policy)
        due = ttl_due(completion, self.spec.run_policy.ttl_seconds_after_finished)
        if due is not None and self.now >= due:
            self.delete_job = True
        elif due is not None:
            self.wake.append((due - self.now).total_seconds())
        return self._done(phase)

    def _done(self, phase: Phase) -> Decision:
        current = self._current()
        expected = len(self.desired.pods)
        if phase is Phase.SUCCEEDED and self.prev_phase is not Phase.SUCCEEDED:
            msg = f"all {expected} pods succeeded" if not self.elastic else "training finished"
            self.cond.clear(ConditionType.RUNNING, "JobSucceeded", msg)
            self.cond.set(ConditionType.SUCCEEDED, True, "PodsSucceeded", msg)
        elif phase is Phase.RUNNING:
            msg = f"{count_pods(current).running} pods running"
            self.cond.set(ConditionType.RUNNING, True, "PodsRunning", msg)
            self.cond.clear(ConditionType.RESTARTING, "Recovered", msg)
        present = {p["metadata"]["name"] for p in current}
        if all(p["metadata"]["name"] in present for p in self.desired.pods):
            self.status["createdAttempt"] = self.attempt
            if phase not in TERMINAL:
                msg = f"created {expected} pods and the headless Service (attempt {self.attempt})"
                self.cond.set(ConditionType.CREATED, True, "PodsCreated", msg)
        counts = count_pods(self.live)
        running = count_pods(current).running
        world = (
            running * self.spec.processes_per_replica if self.elastic else self.desired.world_size
        )
        self.status.update(
            phase=str(phase),
            conditions=self.cond.as_list(),
            pods=counts.as_status(),
            replicas=counts.total,
            selector=names.job_selector(self.job.ref.name),
            observedGeneration=self.job.generation,
            startTime=rfc3339(self.start),
            attempt=self.attempt,
            restarts=self.restarts,
            worldSize=world or 0,
        )
        deletes = tuple(dict.fromkeys(self.deletes))
        return Decision(
            status=self.status,
            events=tuple(self.cond.events),
            entered=phase if phase != self.prev_phase else None,
            create_pods=tuple(self.creates) if phase not in TERMINAL else (),
            delete_pods=deletes,
            delete_job=self.delete_job,
            requeue_after=min(self.wake) if self.wake else None,
            restarts=self.added_restarts,
        )
