"""What the client reads and raises: a job's view, its pods' views, the errors, and
how a job is given (a dict, YAML, a path, the API's Job) and a login made."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from multigpu_operator.api.pod_labels import attempt_of, replica_index
from multigpu_operator.api.runtime import CLUSTER_RUNTIME_KIND
from multigpu_operator.api.spec import API_VERSION, KIND, Job
from multigpu_operator.api.status import JobStatus, Phase
from multigpu_operator.client.log_pods import by_replica_index, pod_name
from multigpu_operator.cluster.errors import ClusterError
from multigpu_operator.cluster.login import Credentials, Login

Manifest = Mapping[str, Any] | str | Path | Job
# The method `list` hides the builtin in the clients' bodies.
Events = list[dict[str, Any]]


class ClientError(Exception):
    """What went wrong, in one line for the user."""


class JobNotFound(ClientError):
    pass


class InvalidJob(ClientError):
    """The API server refused the job; the message names the field."""


class WaitTimeout(ClientError):
    def __init__(self, message: str, status: JobStatus) -> None:
        super().__init__(message)
        self.status = status


class JobEnded(ClientError):
    """The job reached a final phase other than the one waited for."""

    def __init__(self, message: str, status: JobStatus) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class PodView:
    name: str
    replica: int
    attempt: int
    node: str | None
    state: str  # the pod's phase, or why its container waits or ended


@dataclass(frozen=True)
class JobView:
    name: str
    namespace: str
    status: JobStatus
    pods: list[PodView]  # by replica index
    created: str | None = None  # metadata.creationTimestamp
    runtime: str | None = None  # spec.runtimeRef: "ClusterMultiGPURuntime gpu-ddp"

    @property
    def phase(self) -> Phase | None:
        return self.status.phase


def kubeconfig_login(kubeconfig: str | None = None) -> Login:
    """The login of the kubeconfig's current context (`kubeconfig`, else $KUBECONFIG,
    else ~/.kube/config)."""

    def login() -> Credentials | None:
        import kopf  # only when a cluster is asked: offline commands go without

        saved = os.environ.get("KUBECONFIG")
        if kubeconfig:
            os.environ["KUBECONFIG"] = kubeconfig
        try:
            return kopf.login_with_kubeconfig(settings=kopf.OperatorSettings())
        except Exception as err:  # kopf raises bare errors on an unreadable kubeconfig
            raise ClusterError(f"cannot read the kubeconfig: {err}") from err
        finally:
            if kubeconfig:
                _restore("KUBECONFIG", saved)

    return login


def context_namespace(login: Login) -> str:
    """The namespace of the login's context (the kubeconfig's), else `default`."""
    return getattr(login(), "default_namespace", None) or "default"


def _restore(key: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


def manifest_of(job: Manifest) -> dict[str, Any]:
    """A MultiGPUJob object from a dict, YAML text, a YAML file's path or the API's Job."""
    if isinstance(job, Job):
        spec = job.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
        meta = {"name": job.ref.name, "namespace": job.ref.namespace}
        return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}
    if isinstance(job, Path) or (isinstance(job, str) and "\n" not in job and Path(job).is_file()):
        job = Path(job).read_text()
    if isinstance(job, str):
        try:
            job = yaml.safe_load(job)
        except yaml.YAMLError as err:
            raise InvalidJob(f"not valid YAML: {err}") from err
    if not isinstance(job, Mapping) or job.get("kind") != KIND:
        raise InvalidJob(f"not a {KIND}")
    return dict(job)


def pod_view(pod: Mapping[str, Any]) -> PodView:
    status = pod.get("status") or {}
    state = str(status.get("phase") or "Unknown")
    for container in status.get("containerStatuses") or []:
        for how in ("waiting", "terminated"):
            reason = ((container.get("state") or {}).get(how) or {}).get("reason")
            if reason and reason != "Completed":
                state = str(reason)
    node = (pod.get("spec") or {}).get("nodeName")
    return PodView(pod_name(pod), replica_index(pod), attempt_of(pod), node, state)


def job_view(job: Mapping[str, Any], pods: list[dict[str, Any]]) -> JobView:
    meta = job.get("metadata") or {}
    latest = max((attempt_of(p) for p in pods), default=0)
    return JobView(
        name=str(meta.get("name", "?")),
        namespace=str(meta.get("namespace", "?")),
        status=JobStatus.model_validate(job.get("status") or {}),
        pods=[pod_view(p) for p in by_replica_index(pods) if attempt_of(p) == latest],
        created=meta.get("creationTimestamp"),
        runtime=runtime_named((job.get("spec") or {}).get("runtimeRef")),
    )


def runtime_named(ref: Any) -> str | None:
    """A spec.runtimeRef as `mgj` shows it: "ClusterMultiGPURuntime gpu-ddp"."""
    if not isinstance(ref, Mapping) or not ref.get("name"):
        return None
    return f"{ref.get('kind') or CLUSTER_RUNTIME_KIND} {ref['name']}"
