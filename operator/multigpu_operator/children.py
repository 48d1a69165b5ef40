"""Creating a job's children, and the server's refusals of them.

The Service and the pods are created by the controller's pass (controller.py); a child
the server refuses is the job's to fix (validation, admission) or a quota to wait for,
told apart here from what is not the job's doing (an outage, the operator's RBAC, the
namespace going), which is raised.
"""

from __future__ import annotations

import asyncio
from typing import Any

from multigpu_operator import metrics
from multigpu_operator.cluster.admission import refused_field
from multigpu_operator.cluster.errors import AccessDenied, Forbidden, Invalid, NamespaceTerminating
from multigpu_operator.cluster.informer import JobKey, PodInformer, ServiceInformer
from multigpu_operator.cluster.protocol import Cluster

# Pods are created this many at a time, and no more batches once one is refused: a job
# of thousands of pods whose template the server rejects costs one batch of requests.
CREATE_BATCH = 100


class WaitingFor(Exception):
    """A pass that cannot finish for a reason that may pass (a full quota): its job is
    looked at again after the retry backoff, without counting an error."""


def refusal_message(kind: str, err: Invalid | Forbidden) -> str:
    """What the job's condition says about a refused child: the field to fix and the
    server's own message."""
    if kind == "Service":
        return f"the job's headless Service: {err.message}"
    if isinstance(err, Invalid):
        return err.message  # validation names the pod's own field
    return f"{refused_field(err.message)}: {err.message}"


async def create_service(
    cluster: Cluster, services: ServiceInformer, key: JobKey, service: dict[str, Any]
) -> Invalid | Forbidden | None:
    """Create the job's Service; the refusal, if the server refused it."""
    try:
        await cluster.create_service(key[0], service)
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
            *(cluster.create_pod(key[0], pod) for pod in batch), return_exceptions=True
        )
        for pod, result in zip(batch, results, strict=True):
            if not isinstance(result, BaseException):
                informer.created(key, pod["metadata"]["name"])
        metrics.PODS_CREATED.inc(sum(r is True for r in results))
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            if not _refusal(error):
                raise error
        if errors:
            return _refusal(errors[0])
    return None


def _refusal(error: BaseException) -> Invalid | Forbidden | None:
    """`error` if it is the server refusing the object itself (the job's to fix, or a
    quota to wait for); None for what is not the job's doing."""
    if isinstance(error, NamespaceTerminating | AccessDenied):
        return None
    return error if isinstance(error, Invalid | Forbidden) else None
