"""The actuator's creates of a job's children, and the server's refusals of them.

A child the server refuses is the job's to fix (validation, admission) or something to
wait for (a full quota, a ServiceAccount not there yet): it is recorded as a Refusal
that the next pass turns into the job's status (policy/steps/refusals.py). What is not the
job's doing (an outage, the operator's RBAC, the namespace going) is raised. A job that
creates no pods yet has its template checked by a dry run of its first pod instead
(policy/steps/template_check.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from multigpu_operator import metrics
from multigpu_operator.api.spec import Job
from multigpu_operator.cluster.admission import refused_field
from multigpu_operator.cluster.errors import (
    AccessDenied,
    Forbidden,
    Invalid,
    NamespaceTerminating,
    Waitable,
)
from multigpu_operator.cluster.informer import JobKey, PodInformer, ServiceInformer
from multigpu_operator.cluster.kinds import PODS, SERVICES
from multigpu_operator.cluster.protocol import Cluster
from multigpu_operator.policy.step import Decision
from multigpu_operator.policy.steps.refusals import Refusal, Refused

# Pods are created this many at a time, and no more batches once one is refused: a job
# of thousands of pods whose template the server rejects costs one batch of requests.
CREATE_BATCH = 100
# How the API server refuses a dry run that an admission webhook with side effects cannot
# take part in (k8s.io/apiserver's NewDryRunUnsupportedErr): nothing about the pod.
_DRY_RUN_UNSUPPORTED = "does not support dry run"


def refusal(uid: str, refused: Refused, err: Invalid | Forbidden) -> Refusal:
    """The server's refusal as the next pass reads it."""
    invalid = isinstance(err, Invalid)
    return Refusal(
        uid,
        refused,
        err.message,
        invalid=invalid,
        waits=err.reason if isinstance(err, Waitable) else "",
        field="" if invalid else refused_field(err.message),
    )


async def create_service(
    cluster: Cluster, services: ServiceInformer, key: JobKey, service: dict[str, Any]
) -> Invalid | Forbidden | None:
    """Create the job's Service; the refusal, if the server refused it."""
    try:
        await cluster.create(SERVICES, key[0], service, read_back=False)
    except (Invalid, Forbidden) as err:
        if not _refusal(err):
            raise
        return err
    services.created(key, service)
    return None


async def create_pods(
    cluster: Cluster, informer: PodInformer, key: JobKey, pods: tuple[dict[str, Any], ...]
) -> Invalid | Forbidden | None:
    """Create `pods` in batches; the first refusal, after which no batch is sent.
    Other errors (an outage, RBAC, the namespace going) are raised."""
    for start in range(0, len(pods), CREATE_BATCH):
        batch = pods[start : start + CREATE_BATCH]
        results = await asyncio.gather(
            *(cluster.create(PODS, key[0], pod, read_back=False) for pod in batch),
            return_exceptions=True,
        )
        for pod, result in zip(batch, results, strict=True):
            if not isinstance(result, BaseException):
                informer.created(key, pod["metadata"]["name"])
        metrics.PODS_CREATED.inc(sum(isinstance(r, dict) for r in results))
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            if not _refusal(error):
                raise error
        if errors:
            return _refusal(errors[0])
    return None


def _refusal(error: BaseException) -> Invalid | Forbidden | None:
    """`error` if it is the server refusing the object itself (the job's to fix, or
    something to wait for); None for what is not the job's doing."""
    if isinstance(error, NamespaceTerminating | AccessDenied):
        return None
    return error if isinstance(error, Invalid | Forbidden) else None


class TemplateChecks:
    """The generation of each job (by UID) whose pod template the server accepted: at
    most one dry run per generation, none for a pass that creates pods (the creates check
    the template). Kept in memory: an operator restart checks a waiting job once more."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._checked: dict[str, int] = {}

    def forget(self, uid: str) -> None:
        self._checked.pop(uid, None)

    def checked(self, uid: str) -> int | None:
        """The generation whose template the server last accepted (a pass's input)."""
        return self._checked.get(uid)

    async def check(self, job: Job, decision: Decision) -> Invalid | Forbidden | None:
        """The server's refusal of the job's template, if the pass sends its dry-run pod
        and the server refuses it."""
        uid, generation = job.ref.uid, job.generation
        if decision.create_pods:
            # Refused, the job fails; a wait or an outage: the creates come again.
            self._checked[uid] = generation
        pod = decision.dry_run_pod
        if pod is None:
            return None
        try:
            await self._cluster.create(PODS, job.ref.namespace, pod, dry_run=True, read_back=False)
        except (Invalid, Forbidden) as err:
            refused = _refusal(err)
            if refused is None:
                raise
            # A full quota or a missing ServiceAccount is waited for once pods are created,
            # not a fault of the template.
            if not isinstance(refused, Waitable) and _DRY_RUN_UNSUPPORTED not in err.message:
                return refused
        self._checked[uid] = generation
        return None
