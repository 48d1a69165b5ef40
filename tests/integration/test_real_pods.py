"""Real pods on the local cluster's real node (tests/cluster/realnode.py): the operator,
installed by Helm from the local OCI registry (chart and image, as `make images` and
install_operator pushed them), runs as a pod there, and every training mode trains there on
real torch processes, in a namespace that enforces Pod Security "restricted".

Unlike the kwok-based tests, nothing here is simulated: the kubelet pulls every image from
the local registry (policy Always: each pod start asks the registry), starts the
containers, resolves rank 0 through the job's headless Service (CoreDNS), and reports exit
codes, OOM kills and image errors itself.
"""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.localcluster import LocalCluster
from support.chart import helm
from support.jobs import JobEnv, condition
from support.real_pods import install_operator, on_real_node, pod_log, unpushed_images
from support.waiting import wait_for

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
RELEASE = "real"
ACCURACY = re.compile(r"final test_accuracy=([0-9.]+)")


@pytest.fixture(scope="module")
def real_namespace(installed_crd: LocalCluster) -> Iterator[str]:
    """A namespace enforcing Pod Security "restricted", with the chart's operator running
    on the real node and watching only it."""
    missing = unpushed_images(installed_crd)
    assert not missing, f"{missing} not in the local registry: run `make images` first"
    name = f"real-pods-{uuid.uuid4().hex[:6]}"
    installed_crd.kubectl("create", "namespace", name)
    installed_crd.kubectl(
        "label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted"
    )
    try:
        install_operator(installed_crd, RELEASE, name, "--set", f"watchNamespace={name}")
        yield name
    finally:  # also after a failed install: its ClusterRole would block the next one
        kubeconfig = ("--kubeconfig", str(installed_crd.kubeconfig))
        helm(installed_crd.tools, "uninstall", RELEASE, "-n", name, *kubeconfig, check=False)
        installed_crd.kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture
def real(installed_crd: LocalCluster, api_client: Any, core: Any, real_namespace: str) -> JobEnv:
    return JobEnv(installed_crd, api_client, core, real_namespace)


def example(
    name: str, job_name: str, *args: str, memory: str = "1Gi", **spec: Any
) -> dict[str, Any]:
    """An example from examples/, renamed, with `spec` fields and container args changed,
    asking for `memory`."""
    job: dict[str, Any] = yaml.safe_load((REPO / "examples" / name).read_text())
    job["metadata"]["name"] = job_name
    job["spec"].update(spec)
    if args:
        job["spec"]["template"]["spec"]["containers"][0]["args"] = list(args)
    return on_real_node(job, memory=memory)


def finished(real: JobEnv, name: str, timeout: float = 300) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        status = real.status(name)
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    return wait_for(done, f"{name} finished", timeout=timeout, interval=1)


def logs(real: JobEnv, pod: str) -> str:
    return pod_log(real.cluster, real.namespace, pod)


def operator_pod(real: JobEnv) -> dict[str, Any]:
    out = real.cluster.kubectl(
        "get", "pods", "-n", real.namespace, "-l", "app.kubernetes.io/component=operator",
        "-o", "json",
    )  # fmt: skip
    pods = [
        p for p in json.loads(out.stdout)["items"] if not p["metadata"].get("deletionTimestamp")
    ]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    pod: dict[str, Any] = pods[0]
    return pod


def exec_in(real: JobEnv, pod: str, *command: str) -> str:
    return real.cluster.kubectl("exec", "-n", real.namespace, pod, "--", *command).stdout


def resolve(real: JobEnv, pod: str, name: str) -> str:
    """The address `pod` resolves `name` to (cluster DNS, from inside it), or "unresolved"."""
    lookup = (
        f"import socket\ntry: print(socket.gethostbyname({name!r}))\n"
        "except socket.gaierror: print('unresolved')"
    )
    return exec_in(real, pod, "python", "-c", lookup).strip()


def test_the_operator_runs_as_a_restricted_pod_with_probes_metrics_and_helm_test(
    real: JobEnv,
) -> None:
    pod = operator_pod(real)
    name = pod["metadata"]["name"]
    assert pod["spec"]["nodeName"] == "real-node"
    ready = condition(pod["status"], "Ready")
    assert ready["status"] == "True"  # the readiness probe passes
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0  # and liveness does
    assert exec_in(real, name, "id", "-u").strip() == "65532"
    denied = real.cluster.kubectl(
        "exec", "-n", real.namespace, name, "--", "touch", "/written", check=False
    )
    assert "Read-only file system" in denied.stderr
    url = f"http://{pod['status']['podIP']}:9090/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:  # from this machine to the pod IP
        assert "mgj_jobs{" in resp.read().decode()
    kubeconfig = ("--kubeconfig", str(real.cluster.kubeconfig))
    tested = helm(real.cluster.tools, "test", RELEASE, "-n", real.namespace, *kubeconfig)
    assert re.search(r"Phase:\s+Succeeded", tested.stdout), tested.stdout


def test_ddp_with_torchrun_trains_on_two_real_pods(real: JobEnv) -> None:
    real.apply(example("cpu-ddp.yaml", "ddp-torchrun", "--epochs", "6"))
    status = finished(real, "ddp-torchrun")
    assert status["phase"] == "Succeeded", status
    for rank, pod in enumerate(("ddp-torchrun-0", "ddp-torchrun-1")):
        log = logs(real, pod)  # kubectl logs, served by the real kubelet
        assert f"rank={rank}/2" in log
        accuracy = ACCURACY.findall(log)
        assert accuracy, log[-3000:]
        assert float(accuracy[-1]) >= 0.93
    # Rank 1 met rank 0 at its stable DNS name, through the headless Service.
    assert f"master=ddp-torchrun-0.ddp-torchrun.{real.namespace}.svc:29500" in logs(
        real, "ddp-torchrun-1"
    )


def test_a_plain_env_script_from_a_config_map_trains(real: JobEnv) -> None:
    script = (REPO / "examples/scripts/tutorial_ddp.py").read_text()
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "tutorial"},
        "data": {"tutorial_ddp.py": script},
    }
    real.cluster.kubectl("apply", "-n", real.namespace, "-f", "-", stdin=json.dumps(config_map))
    job = example(
        "tutorial-script.yaml", "tutorial", "--epochs", "6", "--checkpoint", "/tmp/ckpt.pt"
    )
    pod = job["spec"]["template"]["spec"]
    pod["containers"][0]["command"] = ["python", "/scripts/tutorial_ddp.py"]
    pod["containers"][0]["volumeMounts"] = [{"name": "scripts", "mountPath": "/scripts"}]
    pod["volumes"] = [{"name": "scripts", "configMap": {"name": "tutorial"}}]
    real.apply(job)
    status = finished(real, "tutorial")
    assert status["phase"] == "Succeeded", status
    for rank in (0, 1):
        log = logs(real, f"tutorial-{rank}")
        assert f"[rank {rank}] done | world size 2" in log
        accuracy = re.findall(rf"\[rank {rank}\] test accuracy ([0-9.]+)", log)
        assert accuracy, log[-3000:]
        assert float(accuracy[0]) >= 0.93


def test_elastic_replaces_a_deleted_pod_which_joins_the_next_round(real: JobEnv) -> None:
    job = example(
        "elastic.yaml", "elastic", "--epochs", "12", gpusPerReplica=0,
        elastic={"minReplicas": 1, "maxReplicas": 2, "maxRestarts": 3}, dnsNames="Replica0",
    )  # fmt: skip
    real.apply(job)
    wait_for(lambda: "epoch 2/" in logs(real, "elastic-1"), "elastic-1 trains", timeout=180)
    pod = real.core.read_namespaced_pod("elastic-1", real.namespace)
    # torchrun is told its own address from the downward API: the pod's IP.
    assert exec_in(real, "elastic-1", "printenv", "PET_LOCAL_ADDR").strip() == pod.status.pod_ip
    assert exec_in(real, "elastic-1", "id", "-u").strip() == "10001"  # the image's user
    # dnsNames Replica0: pod 0, the rendezvous host, has a cluster DNS name through the
    # job's headless Service (CoreDNS) and the other pods have none; the job needs no more.
    domain = f"elastic.{real.namespace}.svc.cluster.local"
    survivor_ip = real.core.read_namespaced_pod("elastic-0", real.namespace).status.pod_ip
    assert resolve(real, "elastic-1", f"elastic-0.{domain}") == survivor_ip
    assert resolve(real, "elastic-0", f"elastic-1.{domain}") == "unresolved"
    real.cluster.kubectl("delete", "pod", "-n", real.namespace, "elastic-1", "--wait=false")
    status = finished(real, "elastic")
    assert status["phase"] == "Succeeded", status
    replacement = real.core.read_namespaced_pod("elastic-1", real.namespace)
    assert replacement.metadata.uid != pod.metadata.uid
    # The survivor's agent restarted its worker, and the new round had both pods.
    survivor = logs(real, "elastic-0")
    assert "restart=1" in survivor
    assert ACCURACY.findall(survivor)
    assert "world_size=2" in logs(real, "elastic-1")


def test_model_parallel_pipeline_across_two_pods_trains(real: JobEnv) -> None:
    real.apply(
        example("model-parallel.yaml", "pipeline", "--epochs", "3", replicas=2, gpusPerReplica=0)
    )
    status = finished(real, "pipeline")
    assert status["phase"] == "Succeeded", status
    assert ACCURACY.findall(logs(real, "pipeline-0")), logs(real, "pipeline-0")[-3000:]


def test_data_parallel_in_one_pod_trains(real: JobEnv) -> None:
    real.apply(example("data-parallel.yaml", "data-parallel", "--epochs", "3", gpusPerReplica=0))
    status = finished(real, "data-parallel")
    assert status["phase"] == "Succeeded", status
    assert ACCURACY.findall(logs(real, "data-parallel-0")), logs(real, "data-parallel-0")[-3000:]


def test_an_image_that_does_not_exist_is_named_on_the_job(real: JobEnv) -> None:
    job = example("cpu-ddp.yaml", "no-image")
    job["spec"]["template"]["spec"]["containers"][0]["image"] = "localhost/multigpu/nowhere:1"
    real.apply(job)

    def reported() -> dict[str, Any] | None:
        running = condition(real.status("no-image"), "Running")
        return running if running.get("reason") in ("ErrImagePull", "ImagePullBackOff") else None

    running = wait_for(reported, "the image error on the job", timeout=60, interval=1)
    assert running["status"] == "False"
    assert "pod no-image-" in running["message"]
    assert 'image "localhost/multigpu/nowhere:1"' in running["message"]

    def notes() -> list[str]:
        events = real.cluster.kubectl(
            "get", "events", "-n", real.namespace, "--field-selector",
            "involvedObject.name=no-image,type=Warning", "-o", "json",
        )  # fmt: skip
        items = json.loads(events.stdout)["items"]
        return [e.get("note") or e.get("message", "") for e in items]

    # The kubelet's Event and its status write of the pod come in no set order.
    wait_for(
        lambda: any("localhost/multigpu/nowhere:1" in note for note in notes()),
        "the kubelet's Warning event naming the image",
    )


@pytest.mark.parametrize(
    ("name", "command", "memory", "exit_code", "reason"),
    [
        pytest.param("exit-one", "import sys; sys.exit(1)", "256Mi", 1, "Error", id="exit-1"),
        pytest.param(
            "oom", "b = bytearray(1 << 30); b[::4096] = b'x' * len(b[::4096])", "64Mi", 137,
            "OOMKilled", id="oom-killed",
        ),
    ],
)  # fmt: skip
def test_exit_codes_and_oom_kills_reach_the_job(
    real: JobEnv, name: str, command: str, memory: str, exit_code: int, reason: str
) -> None:
    job = example("cpu-ddp.yaml", name, memory="32Mi", replicas=1, runPolicy={"backoffLimit": 0})
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["command"] = ["python", "-c", command]
    container["resources"]["limits"] = {"memory": memory}
    job["spec"]["shmSize"] = "0"  # a memory-backed /dev/shm would count against 64Mi
    real.apply(job)
    status = finished(real, name, timeout=120)
    assert status["phase"] == "Failed", status
    assert status.get("lastFailure", {}).get("exitCode") == exit_code, status
    assert status["lastFailure"]["reason"] == reason
    failed = condition(status, "Failed")
    assert f"with exit code {exit_code}: {reason}" in failed["message"]
