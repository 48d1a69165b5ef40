"""Benchmark: spec.placement off against on, for the same stream of jobs on a fragmented
cluster.

Not a test: it prints figures, never asserts on time. Run against the test cluster
(started, or the running one reused; docs/placement.md has the command and figures):

    .venv/bin/python tests/bench/bench_placement.py --jobs 24 --interval 3 --run-seconds 20

It adds 2 blocks x 4 racks x 4 simulated nodes x 8 GPUs (labelled and tainted for this run
only, removed afterwards) with one node in `--taken` racks held by a pod the operator does
not know (a fragmented cluster), then runs the same seeded stream of `--jobs` jobs of 1-4
pods x 8 GPUs, one every `--interval` seconds, each pod running `--run-seconds`, three
times, each in a fresh namespace with its own operator, once the previous run's pods are
gone: placement off, Required and Preferred at the rack level. It prints, per run: the
mean number of racks a multi-pod job's pods ran in (goal: 1.0 Required, <= 1.1 Preferred),
the time from a job's submission to all its pods Running (mean and p90, and the mean
against placement off: goal within 1.2x while capacity exists), and of the jobs whose pods
asked for nodes in rank order (policy/placement/hosts.py), how many ran on exactly them.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster.localcluster import TEST_NAME, LocalCluster
from cluster.node_manifests import GPU_RESOURCE, gpu_node
from cluster.tools import build_tools
from multigpu_operator.api.placement import LABEL_HOST
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from support.jobs import SIM, job_manifest
from support.operator_process import OperatorProcess

REPO = Path(__file__).resolve().parents[2]
POOL = f"{SIM}/pool"
RACK = "topology.example.com/rack"
BLOCK = "topology.example.com/block"
BLOCKS, RACKS, NODES = 2, 4, 4
SIZES = (1, 2, 2, 3, 4)


@dataclass
class Run:
    mode: str
    submitted: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)
    racks: dict[str, int] = field(default_factory=dict)
    # Jobs whose pods asked for nodes in rank order, and whether they ran on them.
    followed: dict[str, bool] = field(default_factory=dict)

    def waits(self) -> list[float]:
        return [self.running[j] - t for j, t in self.submitted.items() if j in self.running]


class Bench:
    def __init__(self, args: argparse.Namespace, cluster: LocalCluster, run_id: str) -> None:
        self.args = args
        self.cluster = cluster
        self.run_id = run_id
        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.rack_of: dict[str, str] = {}

    def nodes(self) -> list[dict[str, Any]]:
        out = []
        for b in range(BLOCKS):
            for r in range(RACKS):
                for n in range(NODES):
                    node = gpu_node(f"place-{self.run_id}-b{b}r{r}n{n}", 8)
                    labels = {POOL: self.run_id, BLOCK: f"b{b}", RACK: f"b{b}r{r}"}
                    node["metadata"]["labels"].update(labels)
                    taint = {"key": POOL, "value": self.run_id, "effect": "NoSchedule"}
                    node["spec"]["taints"].append(taint)
                    self.rack_of[node["metadata"]["name"]] = f"b{b}r{r}"
                    out.append(node)
        return out

    def take(self, namespace: str) -> None:
        """A foreign pod on node 0 of the first `--taken` racks (a fragmented cluster)."""
        for i in range(self.args.taken):
            b, r = divmod(i * 3 % (BLOCKS * RACKS), RACKS)
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"taken-{i}"},
                "spec": {
                    "nodeName": f"place-{self.run_id}-b{b}r{r}n0",
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"limits": {GPU_RESOURCE: "8"}}}
                    ],
                    "tolerations": [{"operator": "Exists"}],
                },
            }
            self.core.create_namespaced_pod(namespace, pod)

    def job(self, name: str, pods: int, mode: str) -> dict[str, Any]:
        spec: dict[str, Any] = {"gang": {"timeoutSeconds": 30, "requeueAfterSeconds": 2}}
        if mode != "off":
            spec["placement"] = {"topologyKey": RACK, "policy": mode}
        manifest = job_manifest(
            name,
            replicas=pods,
            gpus=8,
            annotations={f"{SIM}/succeed-after": f"{self.args.run_seconds}s"},
            **spec,
        )
        manifest["spec"]["template"]["spec"].update(
            nodeSelector={POOL: self.run_id},
            tolerations=[{"key": POOL, "operator": "Exists", "effect": "NoSchedule"}],
        )
        return manifest

    def run(self, mode: str, stream: list[int]) -> Run:
        namespace = f"bench-place-{mode.lower()}-{self.run_id}"
        self.cluster.kubectl("create", "namespace", namespace)
        log = Path(f"/tmp/{namespace}.log")
        operator = OperatorProcess(self.cluster.kubeconfig, namespace, log)
        result = Run(mode)
        try:
            self.take(namespace)
            operator.start()
            start = time.monotonic()
            names = [f"j{i:02d}-{pods}" for i, pods in enumerate(stream)]
            deadline = start + len(stream) * self.args.interval + self.args.timeout
            while time.monotonic() < deadline and len(result.running) < len(stream):
                due = int((time.monotonic() - start) // self.args.interval) + 1
                for name, pods in zip(names[:due], stream[:due], strict=True):
                    if name not in result.submitted:
                        self.custom.create_namespaced_custom_object(
                            GROUP, VERSION, namespace, PLURAL, self.job(name, pods, mode)
                        )
                        result.submitted[name] = time.monotonic()
                self._observe(namespace, dict(zip(names, stream, strict=True)), result)
                time.sleep(0.5)
            print(
                f"  {mode}: {len(result.running)}/{len(stream)} jobs ran "
                f"in {time.monotonic() - start:.0f} s",
                file=sys.stderr,
            )
        finally:
            operator.stop()
            self._clear(namespace)
        return result

    def _clear(self, namespace: str) -> None:
        """Remove the run's pods at once and wait until they are gone: the next run's
        operator watches its own namespace only, and pods still running from this one
        would fill racks it cannot see."""
        self.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        self.cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        deadline = time.monotonic() + 120
        while self.core.list_namespaced_pod(namespace).items and time.monotonic() < deadline:
            time.sleep(1)

    def _observe(self, namespace: str, sizes: dict[str, int], result: Run) -> None:
        by_job: dict[str, list[Any]] = {}
        for pod in self.core.list_namespaced_pod(namespace).items:
            job = (pod.metadata.labels or {}).get("multigpu.dev/job-name")
            if job and not pod.metadata.deletion_timestamp:
                by_job.setdefault(job, []).append(pod)
        now = time.monotonic()
        for job, pods in by_job.items():
            if job in result.running:
                continue
            ran = [p for p in pods if p.status.phase in ("Running", "Succeeded")]
            if len(ran) == sizes[job]:
                result.running[job] = now
                result.racks[job] = len({self.rack_of[p.spec.node_name] for p in ran})
                asked = [(p.metadata.labels or {}).get(LABEL_HOST) for p in ran]
                if all(asked):
                    result.followed[job] = asked == [p.spec.node_name for p in ran]


def report(runs: list[Run], stream: list[int]) -> None:
    multi = {f"j{i:02d}-{p}" for i, p in enumerate(stream) if p > 1}
    base = statistics.mean(runs[0].waits()) if runs[0].waits() else float("nan")
    print(
        f"\n{len(stream)} jobs of 1-4 pods x 8 GPUs ({len(multi)} multi-pod), "
        f"{BLOCKS} blocks x {RACKS} racks x {NODES} nodes x 8 GPUs"
    )
    print(
        "placement    ran  racks/multi-pod job  submit->running mean  p90     vs off"
        "  on the nodes asked for"
    )
    for run in runs:
        racks = [n for j, n in run.racks.items() if j in multi]
        waits = sorted(run.waits())
        mean = statistics.mean(waits) if waits else float("nan")
        p90 = waits[int(0.9 * (len(waits) - 1))] if waits else float("nan")
        mean_racks = statistics.mean(racks) if racks else float("nan")
        asked = f"{sum(run.followed.values())} of {len(run.followed)}" if run.followed else "-"
        print(
            f"{run.mode:<12} {len(run.running):>3}  {mean_racks:>19.2f}  "
            f"{mean:>18.1f} s {p90:>5.1f} s  {mean / base:>5.2f}x  {asked:>22}"
        )
    for run in runs:  # where a mean above the p90 comes from
        slowest = sorted(run.submitted, key=lambda j: -(run.running.get(j, 1e9) - run.submitted[j]))
        slow = {j: run.running[j] - run.submitted[j] for j in slowest[:3] if j in run.running}
        print(f"  slowest {run.mode}: " + ", ".join(f"{j} {w:.1f} s" for j, w in slow.items()))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=24, help="jobs in the stream")
    parser.add_argument("--interval", type=float, default=3.0, help="seconds between jobs")
    parser.add_argument("--run-seconds", type=int, default=20, help="how long each pod runs")
    parser.add_argument("--taken", type=int, default=5, help="racks with a node taken")
    parser.add_argument("--timeout", type=float, default=180, help="wait after the stream")
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--cluster", default=TEST_NAME, help="the local cluster's name")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    cluster = LocalCluster(build_tools(), args.cluster)
    cluster.up(gpu_nodes=0, cpu_nodes=0, real_node=False)
    cluster.install_crds(REPO / "manifests/crd")
    run_id = uuid.uuid4().hex[:6]
    bench = Bench(args, cluster, run_id)
    nodes = bench.nodes()
    stream = [random.Random(args.seed + i).choice(SIZES) for i in range(args.jobs)]
    cluster.kubectl(
        "create", "-f", "-", stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": nodes})
    )
    try:
        cluster.wait_nodes_ready([n["metadata"]["name"] for n in nodes], timeout=180)
        runs = [bench.run(mode, stream) for mode in ("off", "Required", "Preferred")]
        report(runs, stream)
    finally:
        names = [n["metadata"]["name"] for n in nodes]
        cluster.kubectl("delete", "node", *names, "--wait=false", check=False)


if __name__ == "__main__":
    main()
