"""The CustomResourceDefinitions of MultiGPURuntime and ClusterMultiGPURuntime.

Generated from the same typed source as MultiGPUJob's (api/runtime.py reads its fields
from api/spec.py), written by `python -m multigpu_operator.api.gen` beside the job's CRD;
a unit test fails while a written file differs.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

from multigpu_operator.api.crd import CATEGORIES, GENERATED_HEADER, printer_column
from multigpu_operator.api.openapi import Schema, structural_schema
from multigpu_operator.api.runtime import (
    CLUSTER_RUNTIME_KIND,
    CLUSTER_RUNTIME_PLURAL,
    CLUSTER_RUNTIME_SHORT_NAME,
    GROUP,
    RUNTIME_KIND,
    RUNTIME_PLURAL,
    RUNTIME_SHORT_NAME,
    ClusterMultiGPURuntime,
    MultiGPURuntime,
)
from multigpu_operator.api.spec import VERSION

_COLUMNS = [
    printer_column("Mode", ".spec.mode", "string", "Training technique."),
    printer_column("Launcher", ".spec.launcher", "string", "How processes start."),
    printer_column("GPUs/Replica", ".spec.gpusPerReplica", "integer", "GPUs per pod."),
    printer_column("Image", ".spec.template.spec.containers[0].image", "string", "First image."),
    printer_column("Queue", ".spec.queueName", "string", "Kueue LocalQueue."),
    printer_column("Age", ".metadata.creationTimestamp", "date", "Since created."),
]


@functools.cache
def _schema(model: type[MultiGPURuntime]) -> Schema:
    return structural_schema(model, {})


def _crd(model: type[MultiGPURuntime], kind: str, plural: str, short: str, scope: str) -> Any:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short],
                "categories": CATEGORIES,
            },
            "scope": scope,
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": _schema(model)},
                    "additionalPrinterColumns": _COLUMNS,
                }
            ],
        },
    }


def runtime_crd() -> dict[str, Any]:
    """The namespaced MultiGPURuntime's CRD."""
    crd: dict[str, Any] = _crd(
        MultiGPURuntime, RUNTIME_KIND, RUNTIME_PLURAL, RUNTIME_SHORT_NAME, "Namespaced"
    )
    return crd


def cluster_runtime_crd() -> dict[str, Any]:
    """The cluster-scoped ClusterMultiGPURuntime's CRD."""
    crd: dict[str, Any] = _crd(
        ClusterMultiGPURuntime,
        CLUSTER_RUNTIME_KIND,
        CLUSTER_RUNTIME_PLURAL,
        CLUSTER_RUNTIME_SHORT_NAME,
        "Cluster",
    )
    return crd


# File name -> the CRD written there (beside multigpu.dev_multigpujobs.yaml).
RUNTIME_CRDS = {
    f"{GROUP}_{RUNTIME_PLURAL}.yaml": runtime_crd,
    f"{GROUP}_{CLUSTER_RUNTIME_PLURAL}.yaml": cluster_runtime_crd,
}


def crd_yaml(crd: dict[str, Any]) -> str:
    body = yaml.safe_dump(crd, sort_keys=False, width=100, allow_unicode=True)
    return GENERATED_HEADER.replace("api/crd.py", "api/runtime_crd.py") + body


def write_runtime_crds(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, build in RUNTIME_CRDS.items():
        path = directory / name
        path.write_text(crd_yaml(build()))
        written.append(path)
    return written
