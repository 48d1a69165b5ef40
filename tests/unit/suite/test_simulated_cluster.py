"""Fast checks of the local cluster's definitions (no processes started)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.node_manifests import GPU_RESOURCE, cpu_node, gpu_node

STAGES = Path(__file__).parents[2] / "cluster" / "stages.yaml"


def stages() -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in yaml.safe_load_all(STAGES.read_text())}


def selector_keys(stage: dict[str, Any]) -> dict[str, str]:
    return {e["key"]: e["operator"] for e in stage["spec"]["selector"]["matchExpressions"]}


def test_every_lifecycle_step_has_a_stage() -> None:
    assert set(stages()) == {
        "node-initialize",
        "node-heartbeat-with-lease",
        "pod-create",
        "pod-init-container-running",
        "pod-init-container-completed",
        "pod-ready",
        "pod-complete",
        "pod-delete",
        "mgj-pod-delete-left-behind",
        "mgj-pod-succeed",
        "mgj-pod-fail",
        "mgj-pod-fail-at-start",
        "mgj-pod-gpu-unhealthy",
    }


@pytest.mark.parametrize(
    ("stage", "annotation", "operator"),
    [
        # kwok picks randomly among matching stages, so ours must exclude each other.
        ("pod-ready", "sim.multigpu.dev/fail-at-start", "DoesNotExist"),
        ("mgj-pod-fail-at-start", "sim.multigpu.dev/fail-at-start", "Exists"),
        ("mgj-pod-succeed", "sim.multigpu.dev/fail-after", "DoesNotExist"),
        ("mgj-pod-fail", "sim.multigpu.dev/fail-after", "Exists"),
        ("mgj-pod-succeed", "sim.multigpu.dev/gpu-unhealthy-after", "DoesNotExist"),
        ("mgj-pod-gpu-unhealthy", "sim.multigpu.dev/gpu-unhealthy-after", "Exists"),
        ("mgj-pod-gpu-unhealthy", "sim.multigpu.dev/fail-after", "DoesNotExist"),
    ],
)
def test_annotation_stages_are_mutually_exclusive(
    stage: str, annotation: str, operator: str
) -> None:
    key = f'.metadata.annotations["{annotation}"]'
    assert selector_keys(stages()[stage])[key] == operator


def test_a_terminating_pod_is_deleted_by_one_stage_by_its_grace_period() -> None:
    # pod-delete for a grace period still running, the left-behind stage (after a delay)
    # for a pod whose grace period is 0 and which the API server should have removed.
    grace = ".metadata.deletionGracePeriodSeconds"
    graceful, left_behind = stages()["pod-delete"], stages()["mgj-pod-delete-left-behind"]
    for stage, expression in ((graceful, f"{grace} > 0"), (left_behind, f"{grace} == 0")):
        assert selector_keys(stage)[".metadata.deletionTimestamp"] == "Exists"
        assert selector_keys(stage)[expression] == "In"
        assert stage["spec"]["next"] == {"delete": True}
    assert left_behind["spec"]["delay"]["durationMilliseconds"] >= 1000


def test_gpu_node_looks_like_a_gpu_operator_node() -> None:
    node = gpu_node("n", 8)
    assert node["status"]["allocatable"][GPU_RESOURCE] == "8"
    assert node["metadata"]["labels"]["nvidia.com/gpu.count"] == "8"
    assert node["spec"]["taints"] == [{"key": GPU_RESOURCE, "effect": "NoSchedule"}]
    assert "spec" not in cpu_node("c")
