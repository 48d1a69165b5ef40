"""Finds a status read by string key in the pure layers: the previous status is parsed
once per pass into `JobStatus` (api/status.py), and policy reads typed fields only, so a
misspelt field is a type error, not a silent None.

Two shapes are reads by key: a `.get("...")` or `["..."]` on a name or attribute called
`previous`, `status` or `stored` with a key the status declares (at any depth), and any
string naming one of the status's own camelCase fields (`"createdAttempt"`) wherever it
stands. Keys that Kubernetes objects share (a pod's `status.phase`, a Workload
condition's `lastTransitionTime`) are what policy reads on pods and Workloads: only the
first shape catches those.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from pydantic import BaseModel

from multigpu_operator.api.status import JobStatus

# Keys the status shares with the Kubernetes objects policy reads raw (pods, Workloads).
# (topologyKey: a pod affinity term's, which policy writes on the pods it pins.)
_KUBERNETES_KEYS = frozenset(
    {"startTime", "exitCode", "lastTransitionTime", "observedGeneration", "topologyKey"}
)
_STATUS_NAMES = frozenset({"previous", "status", "stored"})


def status_keys(model: type[BaseModel] = JobStatus) -> frozenset[str]:
    """Every JSON key of the status, nested models' included."""
    keys: set[str] = set()
    for name, info in model.model_fields.items():
        keys.add(info.alias or name)
        for arg in (info.annotation, *_args(info.annotation)):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                keys |= status_keys(arg)
    return frozenset(keys)


def _args(annotation: object) -> list[object]:
    found = []
    for arg in typing.get_args(annotation):
        found += [arg, *_args(arg)]
    return found


def string_reads(source: str) -> list[str]:
    """`line: key` of each status read by string key in `source`."""
    keys = status_keys()
    own = {k for k in keys if k != k.lower() and k not in _KUBERNETES_KEYS}
    found = []
    for node in ast.walk(ast.parse(source)):
        key, target = _keyed(node)
        line = getattr(node, "lineno", 0)
        if key in keys and _names_status(target):
            found.append(f"{line}: {key}")
        elif isinstance(node, ast.Constant) and node.value in own:
            found.append(f"{line}: {node.value}")
    return sorted(set(found), key=lambda line: (int(line.split(":")[0]), line))


def _keyed(node: ast.AST) -> tuple[object, ast.expr | None]:
    """(key, what it is read from) of `x.get("key", ...)` or `x["key"]`."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return node.args[0].value, node.func.value
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value, node.value
    return None, None


def _names_status(target: ast.expr | None) -> bool:
    if isinstance(target, ast.Name):
        return target.id in _STATUS_NAMES
    return isinstance(target, ast.Attribute) and target.attr in _STATUS_NAMES


def reads_in(paths: typing.Iterable[Path], root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)}:{line}"
        for path in paths
        for line in string_reads(path.read_text())
    ]
