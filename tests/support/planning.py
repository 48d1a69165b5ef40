"""Builders for planner tests: jobs as the API server hands them over, and readers."""

from __future__ import annotations

from typing import Any

from multigpu_operator.api.spec import Job
from multigpu_operator.plan import plan_job

NAME = "demo"
NAMESPACE = "ml"
UID = "5f0c-uid"
MASTER = f"{NAME}-0.{NAME}.{NAMESPACE}.svc"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
ELASTIC = {"minReplicas": 1, "maxReplicas": 4}


def container(name: str = "trainer", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "train:1", **fields}


def template(*containers: dict[str, Any], **pod_spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": list(containers) or [container()], **pod_spec}}


def job(
    mode: str = "DistributedDataParallel", tmpl: dict[str, Any] | None = None, **spec: Any
) -> Job:
    """A job as the API server would hand it over; `spec` keys are the CRD's (camelCase)."""
    return Job.from_object(
        {
            "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": UID},
            "spec": {"mode": mode, **spec, "template": tmpl or template()},
        }
    )


def elastic(**spec: Any) -> Job:
    return job("Elastic", **{"replicas": 2, "gpusPerReplica": 2, "elastic": ELASTIC, **spec})


def trainer(pod: dict[str, Any], name: str = "trainer") -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == name)


def env(pod: dict[str, Any], name: str = "trainer") -> dict[str, Any]:
    """Variable -> value (or its valueFrom)."""
    return {v["name"]: v.get("value", v.get("valueFrom")) for v in trainer(pod, name)["env"]}


def pod(j: Job, index: int = 0) -> dict[str, Any]:
    return plan_job(j).pods[index]
