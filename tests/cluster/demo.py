"""`make demo`: the operator reconciling every example on the local GPU cluster.

Starts (or reuses) the local control plane with simulated GPU nodes, installs the Helm
chart (CRD, RBAC, ServiceAccount, metrics Service; kwok cannot run containers, so the
chart's Deployment is scaled to 0), runs the operator as a local process with the chart
ServiceAccount's token (so the chart's permissions are what it uses) watching the `demo`
namespace, applies every job in examples/, waits until each reports Running, and shows
the jobs, their pods and where they were scheduled. The operator is stopped at the end; the jobs
stay (`make cluster-down` removes everything). Last, one example trains for real on
this machine's CPU with `mgj run --local` (docs/local-run.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster.localcluster import LocalCluster, build_tools
from support.operator_process import OperatorProcess
from support.service_account import service_account_kubeconfig

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "demo"
CHART = REPO / "charts/multigpu-operator"
CHART_NAMESPACE = "multigpu-system"
RELEASE = "demo"  # the chart names its objects demo-multigpu-operator


def main() -> int:
    cluster = LocalCluster(build_tools())
    cluster.up()
    kubeconfig = install_chart(cluster)
    # A fresh namespace each run, so the demo always starts from nothing.
    cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true")
    cluster.kubectl("create", "namespace", NAMESPACE)

    log_path = cluster.workdir / "demo-operator.log"
    log_path.unlink(missing_ok=True)
    operator = OperatorProcess(kubeconfig, NAMESPACE, log_path)
    operator.start()
    print(f"operator running as the chart's ServiceAccount (log: {log_path})")
    try:
        applied = cluster.kubectl("apply", "-n", NAMESPACE, "-f", str(REPO / "examples"))
        print(applied.stdout, end="")
        deadline = time.monotonic() + 60
        while True:
            jobs = json.loads(cluster.kubectl("get", "mgj", "-n", NAMESPACE, "-o", "json").stdout)
            phases = {
                j["metadata"]["name"]: j.get("status", {}).get("phase") for j in jobs["items"]
            }
            if phases and all(p == "Running" for p in phases.values()):
                break
            if time.monotonic() > deadline:
                print(f"jobs not all Running after 60s: {phases}", file=sys.stderr)
                print(operator.log(), file=sys.stderr)
                return 1
            time.sleep(0.5)
        print()
        print(cluster.kubectl("get", "mgj", "-n", NAMESPACE).stdout)
        print(cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide").stdout)
        print("metrics (excerpt):")
        for line in operator.metrics().splitlines():
            if line.startswith(("mgj_jobs{", "mgj_pods_created_total")):
                print(f"  {line}")
    finally:
        operator.stop()
    print(f"\nAll {len(phases)} example jobs are Running. KUBECONFIG={cluster.kubeconfig}")
    print("Stop the cluster with: make cluster-down")
    return train_locally(REPO / "examples/cpu-ddp.yaml")


def install_chart(cluster: LocalCluster) -> Path:
    """helm upgrade --install the chart; returns a kubeconfig with its ServiceAccount's token."""
    helm = [str(cluster.tools.helm), "--kubeconfig", str(cluster.kubeconfig)]
    subprocess.run(
        [*helm, "upgrade", "--install", RELEASE, str(CHART), "-n", CHART_NAMESPACE,
         "--create-namespace", "--set", "replicaCount=0", "--set", "tests.enabled=false",
         "--wait"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    # Helm installs crds/ only when missing; apply the current CRD as after a chart upgrade.
    cluster.install_crds(CHART / "crds")
    print(f"chart installed: helm -n {CHART_NAMESPACE} status {RELEASE}")
    account = f"{RELEASE}-multigpu-operator"
    path = cluster.workdir / "demo-operator.kubeconfig"
    return service_account_kubeconfig(cluster, CHART_NAMESPACE, account, path)


def train_locally(example: Path) -> int:
    """The example's pods as real training processes here, through the same planner."""
    print(f"\nTraining {example.relative_to(REPO)} for real on this CPU: mgj run --local")
    started = time.monotonic()
    command = [sys.executable, "-m", "multigpu_operator.cli", "run", str(example), "--local"]
    code = subprocess.run(command, cwd=REPO, check=False).returncode
    print(f"mgj run --local exited {code} after {time.monotonic() - started:.0f}s")
    return code


if __name__ == "__main__":
    sys.exit(main())
