"""The Argo CD health check (manifests/argocd/multigpujob-health.lua) in a real Lua 5.1
runtime, on statuses that the operator's own reconcile pass writes for every phase.

Each job below is driven through `decide()` (support.lifecycle.JobRun) to one phase, so the
Lua reads exactly the status fields and conditions the operator produces. The same script
runs on live objects from the cluster in tests/integration/test_gitops.py.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from cluster.tools import build_tools
from support.argocd_health import ARGO_STATUSES, HEALTH_LUA, REPO, Health, health
from support.lifecycle import JobRun, job_object


def ddp(**spec: Any) -> JobRun:
    run = JobRun(job_object(replicas=2, gpusPerReplica=2, **spec))
    run.step()
    return run


def pending() -> JobRun:
    run = ddp()
    run.unschedulable("job-1", "0/5 nodes are available: 4 Insufficient nvidia.com/gpu.")
    run.step(1)
    return run


def running() -> JobRun:
    run = ddp()
    run.run_all()
    run.step(1)
    return run


def restarting() -> JobRun:
    run = running()
    run.set_phase("job-1", "Failed", exit_code=137)
    run.step(1)
    return run


def suspended() -> JobRun:
    run = running()
    run.obj["spec"]["suspend"] = True
    run.obj["metadata"]["generation"] = 2
    run.step(1)
    return run


def succeeded() -> JobRun:
    run = running()
    for name in ("job-0", "job-1"):
        run.set_phase(name, "Succeeded", exit_code=0)
    run.step(1)
    return run


def failed() -> JobRun:
    run = JobRun(job_object(replicas=2, runPolicy={"restartPolicy": "Never"}))
    run.step()
    run.run_all()
    run.step(1)
    run.set_phase("job-0", "Failed", exit_code=1)
    run.step(1)
    return run


@pytest.mark.parametrize(
    ("build", "phase", "argo_status", "message_has"),
    [
        (pending, "Pending", "Progressing", "Insufficient nvidia.com/gpu"),
        (running, "Running", "Healthy", ""),
        (restarting, "Restarting", "Progressing", "137"),
        (suspended, "Suspended", "Suspended", ""),
        (succeeded, "Succeeded", "Healthy", ""),
        (failed, "Failed", "Degraded", "exit code 1"),
    ],
)
def test_every_phase_maps_to_an_argo_cd_health(
    build: Callable[[], JobRun], phase: str, argo_status: str, message_has: str
) -> None:
    run = build()
    assert run.status["phase"] == phase
    result = health(
        {"metadata": run.obj["metadata"], "spec": run.obj["spec"], "status": run.status}
    )
    assert result.status == argo_status
    assert result.status in ARGO_STATUSES
    assert message_has in result.message
    assert result.message


def test_no_status_yet_is_progressing() -> None:
    result = health({"metadata": {"name": "j", "generation": 1}, "spec": {}})
    assert result.status == "Progressing"
    assert "operator" in result.message


def test_a_status_older_than_the_spec_is_progressing_even_if_it_says_succeeded() -> None:
    run = succeeded()
    run.obj["metadata"]["generation"] = run.status["observedGeneration"] + 1
    result = health({"metadata": run.obj["metadata"], "status": run.status})
    assert result.status == "Progressing"
    assert "generation" in result.message


def test_an_unknown_phase_is_unknown() -> None:
    result = health({"metadata": {"generation": 1}, "status": {"phase": "Exploded"}})
    assert result == Health("Unknown", "Unknown phase Exploded")


def test_the_kustomization_puts_exactly_this_script_into_argocd_cm() -> None:
    kubectl = build_tools("k8s", only=True).kubectl
    out = subprocess.run(
        [str(kubectl), "kustomize", str(REPO / "manifests/argocd")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    config_map = yaml.safe_load(out)
    assert (config_map["kind"], config_map["metadata"]["name"]) == ("ConfigMap", "argocd-cm")
    assert config_map["metadata"]["namespace"] == "argocd"
    assert config_map["metadata"]["labels"]["app.kubernetes.io/part-of"] == "argocd"
    key = "resource.customizations.health.multigpu.dev_MultiGPUJob"
    assert config_map["data"] == {key: HEALTH_LUA.read_text()}
