"""A job merged with its runtime: the merge rules, written once (docs/runtimes.md).

`merge_job(job, runtime_spec, runtime)` takes a MultiGPUJob object (as stored, or as a
user wrote it) and the spec of the runtime it names, and returns the job as it runs: the
same object with the merged spec and the runtime's Kueue labels, or the problems that
stop it, each naming its field. Pure: the operator merges the runtime's spec recorded in
the job's status (so a later edit of the runtime changes nothing), `mgj render` the
runtime read from a file or the cluster.

The rules:
- The job's own fields win. A field the job leaves out takes the runtime's value; so
  does one the job leaves at its default (the API server writes the defaults into every
  stored job, so "at its default" is all "left out" can mean): a job cannot ask for a
  default value back against a runtime that sets another (use another runtime).
- Objects (runPolicy, gang, elastic, placement, ...) merge field by field by the same
  rule; lists in them (failure-policy rules, ...) are the job's when it gives a
  non-empty one, else the runtime's (no merge by item).
- The pod template merges as a strategic merge patch (kubectl patch) does: maps key by
  key (labels, annotations, nodeSelector, resources), the job's scalars win; lists with
  a merge key item by item, the runtime's items first, each merged with the job's item
  of the same key, then the job's new items: containers, initContainers, env, volumes,
  imagePullSecrets, resourceClaims by name, volumeMounts by mountPath, volumeDevices by
  devicePath, ports by containerPort, hostAliases by ip. Other lists (command, args,
  tolerations, envFrom, ...) are replaced by the job's.
- queueName and priorityClass become the job's Kueue labels unless it has them.
- lockedFields: a job that sets a locked field to another value than the runtime's
  fails with the field named. A path names spec fields by their JSON names and list
  items by their merge key in brackets: template.spec.containers[trainer].image;
  queueName and priorityClass name the job's Kueue labels.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping
from typing import Any

from multigpu_operator.api.kueue import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from multigpu_operator.api.openapi import Schema
from multigpu_operator.api.problem import Problem
from multigpu_operator.api.schema import spec_schema

# Runtime fields that are not job fields.
RUNTIME_ONLY = ("queueName", "priorityClass", "lockedFields")
# Runtime fields that stand for job labels.
LABEL_FIELDS = {"queueName": QUEUE_NAME_LABEL, "priorityClass": PRIORITY_CLASS_LABEL}
# Strategic merge keys of a PodTemplateSpec's lists, by the list's field name (those of
# core/v1's patchMergeKey tags this template can hold).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "hostAliases": "ip",
}
_ABSENT: Any = object()
_STEP = re.compile(r"([A-Za-z][A-Za-z0-9]*)(?:\[([^\]]+)\])?")


class RuntimeProblems(ValueError):
    """Why a job cannot be merged with its runtime (or the merge gives no valid job)."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


def merge_job(job: Mapping[str, Any], runtime_spec: Mapping[str, Any], runtime: str) -> Any:
    """`job` (a MultiGPUJob object) with its spec merged with `runtime_spec` and the
    runtime's Kueue labels; `runtime` ("ClusterMultiGPURuntime gpu-ddp") names it in
    messages. Raises RuntimeProblems for a locked field the job changes."""
    meta = job.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    own = job.get("spec") or {}
    problems = locked_problems(own, labels, runtime_spec, runtime)
    if problems:
        raise RuntimeProblems(problems)
    blueprint = {k: v for k, v in runtime_spec.items() if k not in RUNTIME_ONLY}
    spec = merge_spec(own, blueprint)
    for field, label in LABEL_FIELDS.items():
        if runtime_spec.get(field) and not labels.get(label):
            labels[label] = runtime_spec[field]
    out = dict(job)
    out["metadata"] = {**meta, "labels": labels} if labels else dict(meta)
    out["spec"] = spec
    return out


def merged_job(job: Mapping[str, Any], runtime_spec: Mapping[str, Any], runtime: str) -> Any:
    """`merge_job`, then the merged job checked as the API server checks a job without a
    runtime (schema and CEL rules): RuntimeProblems names each field that is wrong."""
    out = merge_job(job, runtime_spec, runtime)
    name = (out.get("metadata") or {}).get("name")
    # Without the runtimeRef, for which the CRD skips the cross-field rules.
    spec = {k: v for k, v in out["spec"].items() if k != "runtimeRef"}
    # Imported here: the validator and its libraries (cel-python, jsonschema: 14 MiB,
    # 170 modules) load in the operator with the first job that names a runtime.
    from multigpu_operator.api.validation import validate

    problems = validate(spec, name if isinstance(name, str) else None)
    if problems:
        raise RuntimeProblems(
            [Problem(p.field, f"{p.message} (merged with {runtime})") for p in problems]
        )
    return out


def merge_spec(job: Mapping[str, Any], runtime: Mapping[str, Any]) -> dict[str, Any]:
    """A job's spec merged with a runtime's (without its runtime-only fields)."""
    merged: dict[str, Any] = _merge(job, runtime, _spec_schema(), "spec")
    return merged


def locked_problems(
    job: Mapping[str, Any], labels: Mapping[str, str], runtime: Mapping[str, Any], name: str
) -> list[Problem]:
    """The locked fields of `runtime` that the job's own spec (or its Kueue labels) sets
    to another value."""
    problems = []
    for path in runtime.get("lockedFields") or ():
        if path in LABEL_FIELDS:
            field = f"metadata.labels[{LABEL_FIELDS[path]}]"
            own, theirs = labels.get(LABEL_FIELDS[path], _ABSENT), runtime.get(path, _ABSENT)
        else:
            field = f"spec.{path}"
            own, default = _at(job, path, _spec_schema())
            theirs, _ = _at(runtime, path, _spec_schema())
            if own is not _ABSENT and default is not _ABSENT and own == default:
                own = _ABSENT  # at its default: takes the runtime's value
        if own is not _ABSENT and own != theirs:
            problems.append(
                Problem(field, f"{field} is locked by {name}: leave it out or set it as it")
            )
    return problems


def _merge(job: Any, runtime: Any, schema: Schema | None, path: str) -> Any:
    if runtime is _ABSENT:
        return copy.deepcopy(job)
    if job is _ABSENT:
        return copy.deepcopy(runtime)
    schema = schema or {}
    if schema.get("x-kubernetes-preserve-unknown-fields") or path.startswith("spec.template"):
        return _strategic(job, runtime, path)
    if isinstance(job, Mapping) and isinstance(runtime, Mapping):
        properties = schema.get("properties", {})
        return {
            key: _merge(
                job.get(key, _ABSENT),
                runtime.get(key, _ABSENT),
                properties.get(key),
                f"{path}.{key}",
            )
            for key in _keys(runtime, job)
        }
    if isinstance(job, list):
        return copy.deepcopy(job if job else runtime)
    if "default" in schema and job == schema["default"]:
        return copy.deepcopy(runtime)
    return copy.deepcopy(job)


def _strategic(job: Any, runtime: Any, path: str) -> Any:
    if runtime is _ABSENT:
        return copy.deepcopy(job)
    if job is _ABSENT:
        return copy.deepcopy(runtime)
    if isinstance(job, Mapping) and isinstance(runtime, Mapping):
        out = {}
        for key in _keys(runtime, job):
            theirs, own = runtime.get(key, _ABSENT), job.get(key, _ABSENT)
            if key in MERGE_KEYS and isinstance(theirs, list) and isinstance(own, list):
                out[key] = _merge_by_key(own, theirs, MERGE_KEYS[key], f"{path}.{key}")
            else:
                out[key] = _strategic(own, theirs, f"{path}.{key}")
        return out
    return copy.deepcopy(job)


def _merge_by_key(job: list[Any], runtime: list[Any], key: str, path: str) -> list[Any]:
    own = {item.get(key): item for item in job if isinstance(item, Mapping)}
    out = []
    for item in runtime:
        mine = own.pop(item.get(key), _ABSENT) if isinstance(item, Mapping) else _ABSENT
        out.append(_strategic(mine, item, f"{path}[{item.get(key)}]"))
    # Then the job's items that no runtime item has the key of, in the job's order.
    for item in job:
        if not isinstance(item, Mapping) or own.get(item.get(key)) is item:
            out.append(copy.deepcopy(item))
    return out


def _keys(first: Mapping[str, Any], second: Mapping[str, Any]) -> list[str]:
    return [*first, *(k for k in second if k not in first)]


def _at(value: Any, path: str, schema: Schema | None) -> tuple[Any, Any]:
    """The value at a locked-field path, and the job's default there (or _ABSENT)."""
    for name, item in _STEP.findall(path):
        schema = (schema or {}).get("properties", {}).get(name)
        value = value.get(name, _ABSENT) if isinstance(value, Mapping) else _ABSENT
        if item:
            key = MERGE_KEYS.get(name, "name")
            listed = value if isinstance(value, list) else []
            found = [v for v in listed if isinstance(v, Mapping) and str(v.get(key)) == item]
            value = found[0] if found else _ABSENT
            schema = (schema or {}).get("items")
    return value, (schema or {}).get("default", _ABSENT)


@functools.cache
def _spec_schema() -> Schema:
    return spec_schema()
