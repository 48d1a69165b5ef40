"""Runs manifests/argocd/multigpujob-health.lua the way Argo CD does: the object as the
global `obj`, the chunk returns {status, message}.

Argo CD embeds gopher-lua, a Lua 5.1 implementation; lupa's lua51 module is the reference
Lua 5.1, so syntax or semantics that 5.1 lacks fail here as they would in Argo CD.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lupa import lua51  # type: ignore[import-untyped]

REPO = Path(__file__).resolve().parents[2]
HEALTH_LUA = REPO / "manifests/argocd/multigpujob-health.lua"
# The statuses Argo CD knows.
ARGO_STATUSES = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}


@dataclass(frozen=True)
class Health:
    status: str
    message: str


def health(obj: Mapping[str, Any], script: str | None = None) -> Health:
    lua = lua51.LuaRuntime(unpack_returned_tuples=False)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = lua.execute(script if script is not None else HEALTH_LUA.read_text())
    return Health(status=str(result["status"]), message=str(result["message"]))
