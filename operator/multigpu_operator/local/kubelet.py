"""What the kubelet does to a container's env, command and args, without a cluster (pure).

Kubernetes expands `$(VAR)` in `env[].value` from the variables listed EARLIER in the
same container, and in `command`/`args` from all of them. `$$(VAR)` is a literal
`$(VAR)`; a reference to an unknown variable is kept as written. Downward-API fields
(`valueFrom.fieldRef`) resolve to what a local process would see.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

LOCALHOST = "127.0.0.1"


class LocalPlanError(ValueError):
    """A pod cannot run as a local process; the message says why and what to change."""


def expand(text: str, variables: Mapping[str, str]) -> str:
    """`text` with `$(NAME)` replaced as the kubelet does (its expansion.Expand)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "$" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":  # `$$` is an escaped `$`
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close == -1:  # an unterminated reference is kept as written
                out.append("$(")
                i += 2
                continue
            name = text[i + 2 : close]
            out.append(variables.get(name, f"$({name})"))
            i = close + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)


_LABEL_FIELD = re.compile(r"metadata\.(labels|annotations)\['([^']*)'\]")


def field_value(pod: Mapping[str, Any], field_path: str, pod_uid: str, node: str) -> str | None:
    """A downward-API `fieldRef` as a local process sees it; None if it has no local value.

    Pod and host IPs are 127.0.0.1: every local pod shares this machine's loopback.
    """
    meta = pod.get("metadata", {})
    spec = pod.get("spec", {})
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": pod_uid,
        "spec.nodeName": node,
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": LOCALHOST,
        "status.podIPs": LOCALHOST,
        "status.hostIP": LOCALHOST,
        "status.hostIPs": LOCALHOST,
    }
    if field_path in simple:
        return str(simple[field_path])
    match = _LABEL_FIELD.fullmatch(field_path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    return None


def resolve_env(
    env: list[Mapping[str, Any]],
    pod: Mapping[str, Any],
    *,
    pod_uid: str,
    node: str,
    where: str,
) -> dict[str, str]:
    """The container's `env` list as the process environment, in the kubelet's order.

    `where` names the container in error messages (a MultiGPUJob field path).
    """
    resolved: dict[str, str] = {}
    for var in env:
        name = str(var.get("name", ""))
        source = var.get("valueFrom")
        if source is None:
            resolved[name] = expand(str(var.get("value", "")), resolved)
            continue
        field = source.get("fieldRef")
        if field is not None:
            path = str(field.get("fieldPath", ""))
            local = field_value(pod, path, pod_uid, node)
            if local is None:
                raise LocalPlanError(
                    f"{where}.env[{name}]: fieldRef {path!r} has no value outside a cluster; "
                    "set the variable with `value` to run locally"
                )
            resolved[name] = local
            continue
        kind = next(iter(source), "valueFrom")
        ref = source.get(kind) or {}
        if "key" in ref:  # configMapKeyRef / secretKeyRef
            what = f"{kind} {ref.get('name', '?')}/{ref['key']}"
        elif "resource" in ref:  # resourceFieldRef
            what = f"{kind} {ref['resource']}"
        else:
            what = kind
        raise LocalPlanError(
            f"{where}.env[{name}]: comes from {what}, which a local run cannot read; "
            "set the variable with `value` to run locally"
        )
    return resolved
