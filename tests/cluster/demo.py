"""`make demo`: the operator running in the local cluster, a DDP job training on real pods.

Starts (or reuses) the local cluster: simulated GPU nodes (kwok) and one real node
(containerd, kubelet) that pulls the images `make images` built and pushed to the local
registry. In the demo the real node is the only node a CPU-only pod can land on (the
simulated GPU nodes carry the `nvidia.com/gpu` taint that GPU pods tolerate, and the demo has
no simulated CPU node), so a user's own CPU job, applied as written, really runs. Pushes the
Helm chart to the registry too and installs it from there (`helm install
oci://localhost:5001/charts/multigpu-operator --version X`), so the operator runs as a pod on
the real node and stays running; applies the CPU DistributedDataParallel example, which two
real pods train, and every GPU example, whose pods the simulated GPU nodes run. Shows the
jobs, the trainers' rank logs and final accuracy, which jobs ran for real, and how to reach
everything afterwards. `make cluster-down` removes it all.

`make demo MONITORING=1` (`--monitoring`) also runs a Prometheus (tests/cluster/prometheus.py)
that reads the chart's ServiceMonitor, PodMonitor and alert rules, and prints its address.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster.localcluster import LocalCluster
from cluster.progress import ticking
from cluster.prometheus import Monitoring
from cluster.realnode_config import NODE_NAME, NODE_TAINT
from cluster.tools import build_tools
from multigpu_operator.api.names import LABEL_JOB_NAME
from support.real_pods import install_operator, pod_log

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "demo"
CHART_NAMESPACE = "multigpu-system"
RELEASE = "demo"  # the chart names its objects demo-multigpu-operator
REAL_EXAMPLE = REPO / "examples/cpu-ddp.yaml"
# CPU-only too, but its script is not in the trainer image: `mgj run --local` runs it.
LOCAL_ONLY_EXAMPLES = {REPO / "examples/tutorial-script.yaml"}
# CPU-only jobs that would train on the real node beside the main one (two cores) and end
# before the simulated examples all run: tests/integration/test_frameworks.py runs them.
FRAMEWORK_EXAMPLES = {REPO / "examples/lightning-ddp.yaml", REPO / "examples/accelerate-ddp.yaml"}
TRAIN_TIMEOUT = 600
# --monitoring: the chart's monitors and rules (the example declares the trainers' port).
MONITORING_VALUES = (
    "--set", "serviceMonitor.enabled=true", "--set", "podMonitor.enabled=true",
    "--set", "prometheusRule.enabled=true",
)  # fmt: skip


def main() -> int:
    monitoring = "--monitoring" in sys.argv[1:]
    cluster = LocalCluster(build_tools())
    cluster.up(cpu_nodes=0)
    kubectl = cluster.kubectl
    real_node_takes_cpu_jobs(cluster)
    if monitoring:
        Monitoring(cluster).install_crds()  # the chart's monitors and rules need them
    with ticking("installing the operator (helm --wait)"):
        install_operator(
            cluster, RELEASE, CHART_NAMESPACE, *(MONITORING_VALUES if monitoring else ())
        )
    prometheus = Monitoring(cluster).up(interval="15s") if monitoring else None
    # Helm installs crds/ only when missing; apply the current CRD as after a chart upgrade.
    cluster.install_crds(REPO / "charts/multigpu-operator/crds")
    operator = f"{RELEASE}-multigpu-operator"
    print(f"operator running in the cluster: deployment/{operator} in {CHART_NAMESPACE}")
    # A fresh namespace each run, so the demo always starts from nothing.
    kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true")
    kubectl("create", "namespace", NAMESPACE)

    # As a user applies it: nothing in the file places it on the real node.
    real = yaml.safe_load(REAL_EXAMPLE.read_text())
    kubectl("apply", "-n", NAMESPACE, "-f", str(REAL_EXAMPLE))
    skipped = {REAL_EXAMPLE, *LOCAL_ONLY_EXAMPLES, *FRAMEWORK_EXAMPLES}
    simulated = [p for p in sorted((REPO / "examples").glob("*.yaml")) if p not in skipped]
    for path in simulated:
        print(kubectl("apply", "-n", NAMESPACE, "-f", str(path)).stdout, end="")
    name = real["metadata"]["name"]
    print(f"{name}: training on the real node (2 pods, CPU, gloo)")

    others = [yaml.safe_load(p.read_text())["metadata"]["name"] for p in simulated]
    with ticking("the simulated examples starting"):
        started = wait(cluster, lambda phases: all(phases.get(n) == "Running" for n in others), 120)
    if not started:
        return fail(cluster, operator, "the simulated examples did not all reach Running")
    print(kubectl("get", "mgj", "-n", NAMESPACE).stdout)
    with ticking(f"{name} training", lambda: job_line(cluster, name), every=15):
        done = wait(
            cluster, lambda phases: phases.get(name) in ("Succeeded", "Failed"), TRAIN_TIMEOUT
        )
    phase = phases_of(cluster).get(name)
    for index in range(real["spec"]["replicas"]):
        pod = f"{name}-{index}"
        print(f"--- kubectl logs -n {NAMESPACE} {pod} (last lines) ---")
        print("\n".join(pod_log(cluster, NAMESPACE, pod).splitlines()[-6:]))
    if not done or phase != "Succeeded":
        return fail(cluster, operator, f"{name} ended {phase or 'unfinished'}")
    accuracy = re.findall(
        r"final test_accuracy=([0-9.]+)", pod_log(cluster, NAMESPACE, f"{name}-0")
    )
    print(
        f"\n{name} Succeeded on real pods: final test accuracy {accuracy[-1] if accuracy else '?'}"
    )
    print(kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide").stdout)
    ran, simulated_jobs = jobs_by_node_kind(cluster)
    print(f"""Ran for real (pods on {NODE_NAME}, containerd): {", ".join(ran) or "none"}
Simulated (pods on kwok GPU nodes, no process runs): {", ".join(simulated_jobs) or "none"}
A CPU-only job you apply (no GPUs: gpusPerReplica 0) runs for real on {NODE_NAME}, e.g.
  kubectl apply -f examples/cpu-ddp.yaml    # or: .venv/bin/mgj submit examples/cpu-ddp.yaml
A job that asks for GPUs lands on the simulated GPU nodes: its wiring is real, its training is not.

Left running (until `make cluster-down`):
  export KUBECONFIG={cluster.kubeconfig}
  kubectl get mgj -A -w                                  # every job, as it changes
  kubectl -n {CHART_NAMESPACE} logs deploy/{operator}    # the operator
  kubectl -n {NAMESPACE} logs {name}-0                    # a trainer's log
  {cluster.tools.helm} -n {CHART_NAMESPACE} status {RELEASE}""")
    if prometheus:
        # Built from the Go module alone, this Prometheus has its API but not its web UI.
        print(f"""Prometheus (scrapes the operator and the trainers, evaluates the chart's alerts):
  curl {prometheus}/api/v1/targets    curl {prometheus}/api/v1/alerts
  Grafana: add {prometheus} as a Prometheus data source, then import
  charts/multigpu-operator/dashboards/multigpu-jobs.json (docs/monitoring.md)""")
    return 0


def real_node_takes_cpu_jobs(
    cluster: LocalCluster, delete_simulated_cpu_nodes: bool = True
) -> None:
    """The demo's layout on a cluster that an earlier `make cluster-up` may have made: no
    simulated CPU node, and the real node without the taint that keeps the tests' pods off
    it (kubelet adds it only when the node first registers). tests/integration/
    test_demo_cpu_job.py takes this layout on the tests' cluster, its CPU nodes cordoned."""
    if delete_simulated_cpu_nodes:
        cluster.kubectl("delete", "nodes", "-l", "type=kwok,!nvidia.com/gpu.present",
                        "--ignore-not-found", "--wait=false")  # fmt: skip
    taint = f"{NODE_TAINT['key']}={NODE_TAINT['value']}:{NODE_TAINT['effect']}-"
    cluster.kubectl("taint", "nodes", NODE_NAME, taint, check=False)  # absent: nothing to do


def jobs_by_node_kind(cluster: LocalCluster) -> tuple[list[str], list[str]]:
    """The demo's jobs whose pods ran on the real node, and the others."""
    pods = json.loads(cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json").stdout)
    real_jobs: set[str] = set()
    for pod in pods["items"]:
        job = pod["metadata"].get("labels", {}).get(LABEL_JOB_NAME)
        if job and pod["spec"].get("nodeName") == NODE_NAME:
            real_jobs.add(job)
    jobs = sorted(phases_of(cluster))
    return [j for j in jobs if j in real_jobs], [j for j in jobs if j not in real_jobs]


def phases_of(cluster: LocalCluster) -> dict[str, str | None]:
    jobs = json.loads(cluster.kubectl("get", "mgj", "-n", NAMESPACE, "-o", "json").stdout)
    return {j["metadata"]["name"]: (j.get("status") or {}).get("phase") for j in jobs["items"]}


def job_line(cluster: LocalCluster, name: str) -> str:
    """The job's `kubectl get mgj` line (phase, progress, ETA), its columns one space apart."""
    out = cluster.kubectl("get", "mgj", name, "-n", NAMESPACE, "--no-headers", check=False)
    return " ".join(out.stdout.split()[1:])


def wait(cluster: LocalCluster, done: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not done(phases_of(cluster)):
        if time.monotonic() > deadline:
            return False
        time.sleep(1)
    return True


def fail(cluster: LocalCluster, operator: str, why: str) -> int:
    print(f"demo failed: {why}: {phases_of(cluster)}", file=sys.stderr)
    log = cluster.kubectl("logs", "-n", CHART_NAMESPACE, f"deploy/{operator}", check=False)
    print(log.stdout[-5000:], file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
