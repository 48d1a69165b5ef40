"""emptyDir volumes of a pod as directories of a local run (pure): where each mount path
goes, and paths in a command or environment moved there."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from multigpu_operator.plan.pod import SHM_PATH


def volume_dirs(
    spec: Mapping[str, Any],
    container: Mapping[str, Any],
    pod: str,
    scratch_dir: str,
    notes: list[str],
    warnings: list[str],
) -> dict[str, str]:
    """Mount path -> local directory, for the emptyDir volumes a local run can stand in for."""
    volumes = {v.get("name"): v for v in spec.get("volumes", []) or []}
    mapped: dict[str, str] = {}
    for mount in container.get("volumeMounts", []) or []:
        path = str(mount.get("mountPath", "")).rstrip("/") or "/"
        vname = str(mount.get("name", ""))
        volume = volumes.get(vname, {})
        kind = next((k for k in volume if k != "name"), "unknown")
        if kind == "emptyDir" and path == SHM_PATH:
            notes.append(
                f"{SHM_PATH}: this machine's own (the memory emptyDir the pods get is not needed)"
            )
        elif kind == "emptyDir":
            local = posixpath.join(scratch_dir, pod, vname)
            mapped[path] = local
            notes.append(
                f"{pod}: emptyDir {vname!r} at {path} is {local} (paths in command, args, env "
                f"and workingDir are rewritten; paths your code builds still point at {path})"
            )
        else:
            warnings.append(
                f"volume {vname!r} ({kind}) at {path} is not mounted by a local run: "
                f"{path} is this machine's own"
            )
    return mapped


def rebase(value: str, mounts: Mapping[str, str]) -> str:
    """`value` with paths under an emptyDir mount moved to its local directory."""
    for path in sorted(mounts, key=len, reverse=True):
        # The mount path as a whole path: at a token's start, ending at `/` or a token's end.
        pattern = r"(?<![^\s=:,])" + re.escape(path) + r"(?=/|$|[\s,:;])"
        value = re.sub(pattern, mounts[path].replace("\\", "\\\\"), value)
    return value
