"""GitOps: what is in git stays what is live. The operator writes only status (never
spec), the API server fills defaults from the CRD schema, so `kubectl diff` of the applied
files shows nothing after the jobs ran; and Argo CD's health check (manifests/argocd) reads
the live objects correctly."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from cluster.localcluster import LocalCluster
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from support.argocd_health import health
from support.jobs import SIM, condition, job_manifest
from support.operator_process import OperatorProcess
from support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
# Field managers of the two ways the manifests are applied; every other writer (the
# operator) may own fields of the status subresource only.
APPLIERS = {"kubectl-client-side-apply", "kubectl"}

# Examples that reach Running; CPU-only, so they do not wait for GPUs that other jobs on
# the shared test cluster hold.
RUNNING_EXAMPLES = ("cpu-ddp.yaml", "tutorial-script.yaml")
# Jobs for the phases that stay put, besides the examples.
EXTRA_JOBS = {
    "succeeds": job_manifest(
        "succeeds", replicas=1, gpus=0, annotations={f"{SIM}/succeed-after": "1s"}
    ),
    "suspended": job_manifest("suspended", suspend=True),
    "fails": job_manifest(
        "fails",
        replicas=1,
        gpus=0,
        annotations={f"{SIM}/fail-at-start": "true", f"{SIM}/exit-code": "1"},
        runPolicy={"restartPolicy": "Never"},
    ),
    "unschedulable": job_manifest("unschedulable", replicas=1, gpus=9),
}
EXPECTED = {
    "succeeds": ("Succeeded", "Healthy"),
    "suspended": ("Suspended", "Suspended"),
    "fails": ("Failed", "Degraded"),
    "unschedulable": ("Pending", "Progressing"),
}


def git_checkout(folder: Path) -> tuple[Path, Path]:
    """The manifests as a GitOps tool would hold them, in two folders: examples (applied
    client-side, as `kubectl apply` and Argo CD by default do) and EXTRA_JOBS (applied
    server-side, as Flux and Argo CD's ServerSideApply=true do)."""
    examples, extra = folder / "examples", folder / "extra"
    examples.mkdir(parents=True)
    extra.mkdir()
    for example in RUNNING_EXAMPLES:
        shutil.copy(REPO / "examples" / example, examples / example)
    for name, manifest in EXTRA_JOBS.items():
        (extra / f"{name}.yaml").write_text(yaml.safe_dump(manifest))
    return examples, extra


def live_jobs(api: client.ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL
    )["items"]
    return {job["metadata"]["name"]: job for job in items}


def unsettled(jobs: dict[str, dict[str, Any]], names: set[str]) -> dict[str, Any]:
    """Jobs not (yet) in their expected state, with what they show instead."""
    waiting: dict[str, Any] = {name: "missing" for name in names - set(jobs)}
    for name, job in jobs.items():
        status = job.get("status") or {}
        expected = EXPECTED.get(name, ("Running", "Healthy"))[0]
        if status.get("phase") != expected:
            waiting[name] = status.get("phase")
    # The unschedulable job's Scheduled condition names the shortage once the gang timer runs.
    scheduled = condition(jobs.get("unschedulable", {}).get("status") or {}, "Scheduled")
    if scheduled.get("status") != "False":
        waiting["unschedulable Scheduled condition"] = scheduled
    return waiting


def test_no_drift_after_jobs_ran_and_argo_cd_health_of_live_jobs(
    operator: OperatorProcess,
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    examples, extra = git_checkout(tmp_path / "git")
    files = [*examples.glob("*.yaml"), *extra.glob("*.yaml")]
    names = {yaml.safe_load(path.read_text())["metadata"]["name"] for path in files}
    installed_crd.kubectl("apply", "-n", namespace, "-f", str(examples))
    installed_crd.kubectl("apply", "--server-side", "-n", namespace, "-f", str(extra))
    seen: dict[str, Any] = {}

    def settled() -> dict[str, dict[str, Any]] | None:
        jobs = live_jobs(api_client, namespace)
        seen["waiting for"] = unsettled(jobs, names)
        return None if seen["waiting for"] else jobs

    try:
        jobs = wait_for(settled, "every job in its expected phase", timeout=60)
    except AssertionError as err:
        raise AssertionError(f"{err}: {seen}") from None

    for mode, folder in (("--server-side=false", examples), ("--server-side=true", extra)):
        diff = installed_crd.kubectl("diff", mode, "-n", namespace, "-f", str(folder), check=False)
        assert (diff.returncode, diff.stdout, diff.stderr) == (0, "", ""), mode

    for name, job in jobs.items():
        # Nobody but the applier wrote the spec; the operator wrote only the status.
        assert job["metadata"]["generation"] == 1, name
        writers = [
            entry for entry in job["metadata"]["managedFields"]
            if entry["manager"] not in APPLIERS
        ]  # fmt: skip
        assert writers, name
        assert {entry.get("subresource") for entry in writers} == {"status"}, name
        assert not job["metadata"].get("finalizers"), name

        phase, argo_status = EXPECTED.get(name, ("Running", "Healthy"))
        result = health(job)
        assert result.status == argo_status, (name, phase, result)
    assert "Insufficient nvidia.com/gpu" in health(jobs["unschedulable"]).message
    assert re.search(r"\bexit code 1\b", health(jobs["fails"]).message)  # not 137
