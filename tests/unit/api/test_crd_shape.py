"""The CRD's shape, generated from the API's declaration (api/): its defaults, descriptions,
names, columns and size, and the manifest on disk. Offline validation:
tests/unit/api/test_crd.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from multigpu_operator.api.crd import crd, crd_yaml
from multigpu_operator.api.gen import CRD_PATH
from multigpu_operator.api.schema import spec_schema
from multigpu_operator.api.spec import JobSpec
from multigpu_operator.api.validation import with_defaults
from support.crd_specs import spec

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "raw",
    [
        spec(),
        spec(mode="DataParallel"),
        spec(mode="ModelParallel"),
        spec(mode="ModelParallel", modelParallel={}),
        spec(mode="Elastic", elastic={"minReplicas": 1, "maxReplicas": 2}),
    ],
    ids=["ddp", "dp", "mp", "mp-empty-policy", "elastic"],
)
def test_server_defaults_give_the_same_jobspec_as_the_typed_model(raw: dict[str, Any]) -> None:
    # The operator reads what the API server stored (defaults applied); `mgj render`
    # reads the user's file. Both must mean the same job.
    assert JobSpec.model_validate(with_defaults(spec_schema(), raw)) == JobSpec.model_validate(raw)


def test_every_field_has_a_description() -> None:
    def walk(node: dict[str, Any], path: str, described: bool = True) -> list[str]:
        # Array items are described by their array; the pod spec is not ours to describe.
        missing = [path] if described and not node.get("description") else []
        if path == "spec.template.spec":
            return missing
        for key, sub in node.get("properties", {}).items():
            missing += walk(sub, f"{path}.{key}")
        if "items" in node:
            missing += walk(node["items"], f"{path}[]", described=False)
        return missing

    root = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    missing = walk(root["properties"]["spec"], "spec") + walk(
        root["properties"]["status"], "status"
    )
    assert missing == []


def test_names_subresources_and_columns() -> None:
    c = crd()
    assert c["metadata"]["name"] == "multigpujobs.multigpu.dev"
    assert c["spec"]["names"] == {
        "kind": "MultiGPUJob",
        "listKind": "MultiGPUJobList",
        "plural": "multigpujobs",
        "singular": "multigpujob",
        "shortNames": ["mgj"],
        "categories": ["multigpu"],
    }
    (version,) = c["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    assert [col["jsonPath"] for col in version["additionalPrinterColumns"]] == [
        ".spec.mode",
        ".spec.replicas",
        ".status.worldSize",
        ".spec.gpusPerReplica",
        ".status.phase",
        ".status.reason",
        ".status.restarts",
        ".status.placement.summary",
        ".spec.runtimeRef.name",
        ".status.progress.summary",
        ".status.progress.eta",
        ".metadata.creationTimestamp",
    ]


def test_crd_fits_in_client_side_apply_annotation() -> None:
    # Client-side `kubectl apply` copies the object into an annotation; all annotations
    # of an object share a 256 KiB limit.
    assert len(json.dumps(crd())) < 128 * 1024


def test_manifest_on_disk_is_generated_from_crd() -> None:
    on_disk = (REPO / CRD_PATH).read_text()
    assert on_disk == crd_yaml(), (
        f"{CRD_PATH} is out of date: run python -m multigpu_operator.api.gen"
    )
    assert yaml.safe_load(on_disk) == crd()
