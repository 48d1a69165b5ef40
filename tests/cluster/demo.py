"""`make demo`: the operator running in the local cluster, a DDP job training on real pods.

Starts (or reuses) the local cluster: simulated GPU nodes (kwok) and one real node
(containerd, kubelet) that pulls the images `make images` built and pushed to the local
registry. Pushes the Helm chart there too and installs it from there (`helm install
oci://localhost:5001/charts/multigpu-operator --version X`), so the operator runs as a pod
on the real node and stays running; applies the CPU
DistributedDataParallel example there, where two real pods train it, and every other
example, whose pods the simulated GPU nodes run. Shows the jobs, the trainers' rank logs
and final accuracy, and how to reach everything afterwards. `make cluster-down` removes it
all.
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
from cluster.tools import build_tools
from support.real_pods import install_operator, on_real_node, pod_log

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "demo"
CHART_NAMESPACE = "multigpu-system"
RELEASE = "demo"  # the chart names its objects demo-multigpu-operator
REAL_EXAMPLE = REPO / "examples/cpu-ddp.yaml"
TRAIN_TIMEOUT = 600


def main() -> int:
    cluster = LocalCluster(build_tools())
    cluster.up()
    kubectl = cluster.kubectl
    with ticking("installing the operator (helm --wait)"):
        install_operator(cluster, RELEASE, CHART_NAMESPACE)
    # Helm installs crds/ only when missing; apply the current CRD as after a chart upgrade.
    cluster.install_crds(REPO / "charts/multigpu-operator/crds")
    operator = f"{RELEASE}-multigpu-operator"
    print(f"operator running in the cluster: deployment/{operator} in {CHART_NAMESPACE}")
    # A fresh namespace each run, so the demo always starts from nothing.
    kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true")
    kubectl("create", "namespace", NAMESPACE)

    real = on_real_node(yaml.safe_load(REAL_EXAMPLE.read_text()))
    kubectl("apply", "-n", NAMESPACE, "-f", "-", stdin=json.dumps(real))
    simulated = [p for p in sorted((REPO / "examples").glob("*.yaml")) if p != REAL_EXAMPLE]
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
    print(f"""Left running (until `make cluster-down`):
  export KUBECONFIG={cluster.kubeconfig}
  kubectl get mgj -A -w                                  # every job, as it changes
  kubectl -n {CHART_NAMESPACE} logs deploy/{operator}    # the operator
  kubectl -n {NAMESPACE} logs {name}-0                    # a trainer's log
  {cluster.tools.helm} -n {CHART_NAMESPACE} status {RELEASE}""")
    return 0


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
