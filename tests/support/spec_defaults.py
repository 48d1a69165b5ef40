"""Defaults of a job's spec, read from its one declaration (api/spec.py), for tests that
compare them with what the API server stored."""

from __future__ import annotations

from typing import Any

from multigpu_operator.api.spec import JobSpec


def _default(field: str) -> Any:
    return JobSpec.model_fields[field].default


DEFAULT_GPU_RESOURCE = _default("gpu_resource")
DEFAULT_LAUNCHER = _default("launcher")
DEFAULT_MASTER_PORT = _default("master_port")
DEFAULT_SHM_SIZE = _default("shm_size")
