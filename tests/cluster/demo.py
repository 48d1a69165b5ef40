"""`make demo`: the operator reconciling every example on the local GPU cluster.

Starts (or reuses) the local control plane with simulated GPU nodes, installs the
CRD, runs the operator as a local process watching the `demo` namespace, applies
every job in examples/, waits until each reports Running, and shows the jobs, their
pods and where they were scheduled. The operator is stopped at the end; the jobs
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

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "demo"


def main() -> int:
    cluster = LocalCluster(build_tools())
    cluster.up()
    cluster.install_crds(REPO / "manifests/crd")
    # A fresh namespace each run, so the demo always starts from nothing.
    cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true")
    cluster.kubectl("create", "namespace", NAMESPACE)

    log_path = cluster.workdir / "demo-operator.log"
    log_path.unlink(missing_ok=True)
    operator = OperatorProcess(cluster.kubeconfig, NAMESPACE, log_path)
    operator.start()
    print(f"operator running (log: {log_path})")
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
