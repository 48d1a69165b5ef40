"""One pod of a job, built from the user's pod template.

The user's template is kept: anything the operator does not set passes through
unchanged. Where the operator must set a field the user also set to something else, the
result is a conflict naming that field, never a silent override. Conflicts are collected
(`FieldConflicts`), not raised at the first: the planner raises one PlanError with all of them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from multigpu_operator.api import names
from multigpu_operator.api.spec import Job, JobSpec
from multigpu_operator.api.template import trainer_index
from multigpu_operator.plan.env import EnvVar, defaulted_env
from multigpu_operator.plan.errors import FieldConflicts
from multigpu_operator.plan.meta import job_labels, owner_references
from multigpu_operator.plan.security import add_security_defaults

TEMPLATE = "spec.template"
# GPU nodes (whole GPUs and MIG alike) carry this NoSchedule taint.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
# Node label set by GPU feature discovery.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
SHM_VOLUME = "mgj-shm"
SHM_PATH = "/dev/shm"
RESTART_POLICY = "Never"
ENV_DOC = "docs/env-contract.md"


def build_pod(
    job: Job, index: int, env: Sequence[EnvVar], conflicts: FieldConflicts
) -> dict[str, Any]:
    """Pod `index` of `job`; `env` goes first on the training container. What conflicts
    with the template is added to `conflicts` (the pod is then not to be used)."""
    spec = job.spec
    template = copy.deepcopy(dict(spec.template))
    name = names.pod_name(job.ref.name, index)
    user_metadata = _mapping(template.get("metadata"), f"{TEMPLATE}.metadata", conflicts)
    metadata = _metadata(job, index, name, user_metadata, conflicts)
    path = f"{TEMPLATE}.spec"
    pod_spec = _mapping(template.get("spec"), path, conflicts)

    _set(pod_spec, "hostname", name, f"{path}.hostname", "each pod's stable DNS name", conflicts)
    _set(
        pod_spec,
        "subdomain",
        names.service_name(job.ref.name),
        f"{path}.subdomain",
        "the job's headless Service",
        conflicts,
    )
    restart = pod_spec.get("restartPolicy")
    if restart not in (None, RESTART_POLICY):
        conflicts.add(
            f"{path}.restartPolicy",
            f"is {restart!r}, but must be {RESTART_POLICY!r}: the operator replaces failed pods "
            "itself; remove it",
        )
    pod_spec["restartPolicy"] = RESTART_POLICY
    # One variable set per Service in the namespace otherwise; many jobs make that huge.
    pod_spec.setdefault("enableServiceLinks", False)

    containers = _list(pod_spec.get("containers"), f"{path}.containers", conflicts)
    if not containers:  # the API server requires one; nothing to train in otherwise
        conflicts.add(f"{path}.containers", "must list the training container")
        conflicts.raise_any()
    trainer = trainer_index(containers)
    container = containers[trainer]
    cpath = f"{path}.containers[{container.get('name') or trainer}]"
    _add_env(container, env, cpath, conflicts)
    _gpu_resources(container, spec, cpath, conflicts)
    if spec.uses_gpus:
        _tolerate_gpus(pod_spec, path, conflicts)
    if spec.gpu_product is not None:
        selector = _mapping(pod_spec.get("nodeSelector"), f"{path}.nodeSelector", conflicts)
        _set(
            selector,
            GPU_PRODUCT_LABEL,
            spec.gpu_product,
            f"{path}.nodeSelector[{GPU_PRODUCT_LABEL}]",
            "from spec.gpuProduct",
            conflicts,
        )
        pod_spec["nodeSelector"] = selector
    if spec.shm_size is not None:
        _add_shm(pod_spec, container, spec.shm_size, path, cpath, conflicts)
    add_security_defaults(
        pod_spec,
        container,
        _list(pod_spec.get("volumes"), f"{path}.volumes", conflicts),
        _list(container.get("volumeMounts"), f"{cpath}.volumeMounts", conflicts),
        path,
        conflicts,
    )
    containers[trainer] = container
    pod_spec["containers"] = containers

    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def _metadata(
    job: Job, index: int, name: str, user: dict[str, Any], conflicts: FieldConflicts
) -> dict[str, Any]:
    path = f"{TEMPLATE}.metadata"
    for key in ("name", "generateName", "namespace", "ownerReferences"):
        if user.get(key):
            conflicts.add(f"{path}.{key}", "is set by the operator for each pod; remove it")
    labels = {
        str(k): v for k, v in _mapping(user.get("labels"), f"{path}.labels", conflicts).items()
    }
    ours = {**job_labels(job), names.LABEL_REPLICA_INDEX: str(index)}
    for key, val in ours.items():
        _set(labels, key, val, f"{path}.labels[{key}]", "the operator's own label", conflicts)
    metadata: dict[str, Any] = {"name": name, "namespace": job.ref.namespace, "labels": labels}
    for key, val in user.items():
        if key not in metadata and key not in ("generateName", "ownerReferences"):
            metadata[key] = val
    metadata["ownerReferences"] = owner_references(job)
    return metadata


def _add_env(
    container: dict[str, Any], env: Sequence[EnvVar], cpath: str, conflicts: FieldConflicts
) -> None:
    user_env = _list(container.get("env"), f"{cpath}.env", conflicts)
    user_names = {str(var.get("name")) for var in user_env}
    for var in env:
        if var["name"] in user_names:
            conflicts.add(
                f"{cpath}.env[{var['name']}]",
                f"is set by the operator (see {ENV_DOC}); remove it",
            )
    # Ours first: Kubernetes expands $(VAR) only from variables listed earlier, so the
    # user's own variables can be built from ours. Each pod gets its own copy; a JSON
    # round trip copies these plain values ~10x as fast as copy.deepcopy.
    defaults = [var for var in defaulted_env() if var["name"] not in user_names]
    container["env"] = [*orjson.loads(orjson.dumps([*env, *defaults])), *user_env]


def _gpu_resources(
    container: dict[str, Any], spec: JobSpec, cpath: str, conflicts: FieldConflicts
) -> None:
    resource = spec.gpu_resource
    want = str(spec.gpus_per_replica)
    resources = _mapping(container.get("resources"), f"{cpath}.resources", conflicts)
    for kind in ("limits", "requests"):
        section = _mapping(resources.get(kind), f"{cpath}.resources.{kind}", conflicts)
        if resource in section and str(section[resource]) != want:
            conflicts.add(
                f"{cpath}.resources.{kind}[{resource}]",
                f"is {section[resource]!r}, but spec.gpusPerReplica is {spec.gpus_per_replica}; "
                "remove it (the operator sets it from spec.gpusPerReplica)",
            )
        if section:
            resources[kind] = section
    if spec.uses_gpus:
        # Extended resources get requests equal to limits by default.
        resources.setdefault("limits", {})[resource] = want
    if resources:
        container["resources"] = resources


def _tolerate_gpus(pod_spec: dict[str, Any], path: str, conflicts: FieldConflicts) -> None:
    tolerations = _list(pod_spec.get("tolerations"), f"{path}.tolerations", conflicts)
    if not any(_tolerates_gpu_taint(t) for t in tolerations):
        tolerations.append(dict(GPU_TOLERATION))
    pod_spec["tolerations"] = tolerations


def _tolerates_gpu_taint(toleration: Mapping[str, Any]) -> bool:
    """Whether it tolerates every `nvidia.com/gpu` NoSchedule taint, whatever its value."""
    return (
        toleration.get("operator") == "Exists"
        and toleration.get("key") in (None, "", GPU_TAINT_KEY)
        and toleration.get("effect") in (None, "", "NoSchedule")
    )


def _add_shm(
    pod_spec: dict[str, Any],
    container: dict[str, Any],
    size: str,
    path: str,
    cpath: str,
    conflicts: FieldConflicts,
) -> None:
    volumes = _list(pod_spec.get("volumes"), f"{path}.volumes", conflicts)
    if any(v.get("name") == SHM_VOLUME for v in volumes):
        conflicts.add(
            f"{path}.volumes[{SHM_VOLUME}]", "is a name the operator uses for /dev/shm; rename it"
        )
    mounts = _list(container.get("volumeMounts"), f"{cpath}.volumeMounts", conflicts)
    for mount in mounts:
        if str(mount.get("mountPath", "")).rstrip("/") == SHM_PATH:
            conflicts.add(
                f"{cpath}.volumeMounts[{SHM_PATH}]",
                f"the operator mounts /dev/shm ({size}, from spec.shmSize); remove this mount "
                'or set spec.shmSize to "0" to keep it',
            )
    # Containers get 64 MiB of /dev/shm: DataLoader workers and NCCL need more.
    volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": size}})
    mounts.append({"name": SHM_VOLUME, "mountPath": SHM_PATH})
    pod_spec["volumes"] = volumes
    container["volumeMounts"] = mounts


def _set(
    obj: dict[str, Any], key: str, value: Any, field: str, why: str, conflicts: FieldConflicts
) -> None:
    """Set `key`, unless the user set it to something else."""
    if key in obj and obj[key] != value:
        conflicts.add(
            field, f"is {obj[key]!r}, but the operator sets it to {value!r} ({why}); remove it"
        )
    obj[key] = value


def _mapping(obj: object, field: str, conflicts: FieldConflicts) -> dict[str, Any]:
    """`obj` as an object; anything else is a conflict, and planning goes on with {}."""
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        conflicts.add(field, f"must be an object, not {type(obj).__name__}")
        return {}
    return dict(obj)


def _list(obj: object, field: str, conflicts: FieldConflicts) -> list[dict[str, Any]]:
    """`obj` as a list of objects; anything else is a conflict, and planning goes on
    without it."""
    if obj is None:
        return []
    if not isinstance(obj, list):
        conflicts.add(field, f"must be a list, not {type(obj).__name__}")
        return []
    return [_mapping(item, f"{field}[{i}]", conflicts) for i, item in enumerate(obj)]
