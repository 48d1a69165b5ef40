"""`helm upgrade` to a new chart version, then `helm uninstall` and a new install, while jobs
run: every running job keeps its pods (same UIDs, no restarts) and finishes. The chart comes
from the local OCI registry, as users install it (`helm install oci://... --version X`);
one job runs on real pods of the real node, pulled from that registry, the other on
simulated GPU nodes.

The real pods wait for a file that the test writes at the end, so the job is still
running through every step however busy the machine is, and then succeeds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from cluster.images import TRAINER_IMAGE
from cluster.localcluster import LocalCluster
from cluster.registry import chart_meta, local_name
from support.chart import helm
from support.jobs import JobEnv, job_manifest
from support.real_pods import install_operator, on_real_node, unpushed_images
from support.waiting import wait_for

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
RELEASE = "upgraded"
REAL, SIMULATED = "on-real-pods", "on-gpu-nodes"
FINISH = "/tmp/finish"
WAIT_FOR_FINISH = (
    f"import os, time\nwhile not os.path.exists({FINISH!r}): time.sleep(0.5)\nprint('finished')"
)


def bumped(version: str) -> str:
    """The next patch release: 0.1.0 -> 0.1.1."""
    major, minor, patch = version.split("-")[0].split(".")
    return f"{major}.{minor}.{int(patch) + 1}"


def jobs() -> list[dict[str, Any]]:
    """Two 2-pod jobs: one on the real node (waiting for FINISH), one on the GPU nodes."""
    real = job_manifest(REAL)
    trainer = real["spec"]["template"]["spec"]["containers"][0]
    trainer.update(image=TRAINER_IMAGE, command=["python", "-c", WAIT_FOR_FINISH])
    simulated: dict[str, Any] = yaml.safe_load((REPO / "examples/ddp.yaml").read_text())
    simulated["metadata"]["name"] = SIMULATED
    simulated["spec"]["gpusPerReplica"] = 1
    simulated["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "100m", "memory": "1Gi"}
    }
    return [on_real_node(real, memory="256Mi"), simulated]


def identities(real: JobEnv) -> dict[str, tuple[str, int]]:
    """Each pod of both jobs: its UID and its containers' restarts."""
    found = {}
    for job in (REAL, SIMULATED):
        for pod in real.pods(job):
            restarts = sum(c.restart_count for c in pod.status.container_statuses or [])
            found[pod.metadata.name] = (pod.metadata.uid, restarts)
    return found


def operator_pods(real: JobEnv) -> set[str]:
    pods = real.core.list_namespaced_pod(
        real.namespace, label_selector="app.kubernetes.io/component=operator"
    )
    return {p.metadata.uid for p in pods.items if not p.metadata.deletion_timestamp}


def phases(real: JobEnv) -> dict[str, str | None]:
    return {job: real.status(job).get("phase") for job in (REAL, SIMULATED)}


def pulled_from_registry(real: JobEnv, pod: str) -> bool:
    """The kubelet's own event: it pulled the pod's image by the registry's name."""
    events = real.core.list_namespaced_event(
        real.namespace, field_selector=f"involvedObject.name={pod},reason=Pulling"
    )
    wanted = f'"{local_name(TRAINER_IMAGE)}"'
    return any(wanted in (e.message or "") for e in events.items)


def test_helm_upgrade_and_uninstall_keep_running_jobs_and_their_pods(
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    missing = unpushed_images(installed_crd)
    assert not missing, f"{missing} not in the local registry: run `make images` first"
    real = JobEnv(installed_crd, api_client, core, namespace)
    watch = ("--set", f"watchNamespace={namespace}")
    kubeconfig = ("--kubeconfig", str(installed_crd.kubeconfig), "-n", namespace)
    try:
        install_operator(installed_crd, RELEASE, namespace, *watch)
        for job in jobs():
            real.apply(job)
        wait_for(
            lambda: real.running(REAL, 2) and real.running(SIMULATED, 2),
            "both jobs' pods running", timeout=180,
        )  # fmt: skip
        wait_for(lambda: set(phases(real).values()) == {"Running"}, "both jobs Running")
        # The kubelet posts its Events in the background.
        wait_for(lambda: pulled_from_registry(real, f"{REAL}-0"), "the kubelet's Pulling event")
        before, operator = identities(real), operator_pods(real)
        assert len(before) == 4
        assert all(restarts == 0 for _, restarts in before.values())

        # A new chart version, and a changed value that rolls the operator's pod.
        version = bumped(str(chart_meta()["version"]))
        install_operator(
            installed_crd, RELEASE, namespace, *watch,
            "--set-string", "podAnnotations.upgraded=yes", version=version,
        )  # fmt: skip
        (listed,) = json.loads(helm(installed_crd.tools, "list", *kubeconfig, "-o", "json").stdout)
        assert (listed["chart"], listed["status"]) == (f"multigpu-operator-{version}", "deployed")
        assert str(listed["revision"]) == "2"
        replaced = operator_pods(real)
        assert replaced, "no operator pod after the upgrade"
        assert not replaced & operator, "the upgrade did not replace the operator's pod"
        assert identities(real) == before
        assert phases(real) == {REAL: "Running", SIMULATED: "Running"}

        # Uninstalled, the operator goes; the CRD, the jobs and their pods stay.
        helm(installed_crd.tools, "uninstall", RELEASE, *kubeconfig, "--wait")
        wait_for(lambda: not operator_pods(real), "the operator's pods gone")
        assert identities(real) == before
        install_operator(installed_crd, RELEASE, namespace, *watch, version=version)
        assert identities(real) == before

        for pod in (f"{REAL}-0", f"{REAL}-1"):
            installed_crd.kubectl("exec", "-n", namespace, pod, "--", "touch", FINISH)
        real.wait_phase(REAL, "Succeeded", timeout=120)
        after = {
            name: (uid, restarts)
            for name, (uid, restarts) in identities(real).items()
            if name.startswith(SIMULATED)
        }
        assert after == {k: v for k, v in before.items() if k.startswith(SIMULATED)}
        assert phases(real)[SIMULATED] == "Running"
        for pod in (f"{REAL}-0", f"{REAL}-1"):
            read = core.read_namespaced_pod(pod, namespace)
            assert (read.metadata.uid, read.status.phase) == (before[pod][0], "Succeeded")
    finally:
        helm(installed_crd.tools, "uninstall", RELEASE, *kubeconfig, check=False)
