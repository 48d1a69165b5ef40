"""Benchmark: a node failing under a running DistributedDataParallel job, until every
rank runs again.

Not a test: it prints figures, never asserts on time. Run against the test cluster
(started, or the running one reused; docs/benchmarks.md has the command and figures):

    .venv/bin/python tests/bench/bench_recovery.py --pods 64 --repeat 3

It adds `--pods`/8 + 1 simulated 8-GPU nodes (one to spare, so the job can leave the
failed node; labelled and tainted for this run only, removed afterwards) and starts the
operator as a real process watching a fresh namespace. Each repetition runs a job of
`--pods` one-GPU pods on them, waits until all run, then fails the node with most of its
pods: the unreachable taint of the node lifecycle controller (`--fault unreachable`,
which the job's pods tolerate for 0 s, kept on until the taint-eviction controller has
acted: the node lifecycle controller takes it off a node still reporting Ready) or a GPU
health taint (`--fault gpu-health`, tolerated by none). A pod watch times, from the
taint:

- seen: the first pod the fault ended (DisruptionTarget, being deleted, or Failed);
- deleting: every pod of the first attempt being deleted (the operator ends the attempt);
- gone: the last of them removed (their grace period, here kwok's: up to the pod's
  terminationGracePeriodSeconds, `--grace-seconds`, 30 by default as in Kubernetes);
- created: every pod of the second attempt created (same names: each waits for its
  predecessor to go);
- running: every one of them Running (the scheduler and kwok).

The operator's part is seen -> deleting plus gone -> created: what it takes to act,
without the grace period it must wait out. Figures are medians over the repetitions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.observe import clock, watch

from cluster.localcluster import TEST_NAME, LocalCluster
from cluster.node_manifests import gpu_node
from cluster.tools import build_tools
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from support.operator_process import OperatorProcess

REPO = Path(__file__).resolve().parents[2]
RUN_LABEL = "bench.multigpu.dev/recovery"  # label and taint of this run's nodes
JOB_LABEL = "multigpu.dev/job-name"
ATTEMPT_LABEL = "multigpu.dev/attempt"
GPUS_PER_NODE = 8
UNREACHABLE = "node.kubernetes.io/unreachable"
FAULT_TAINTS = {
    "unreachable": (UNREACHABLE, ""),
    "gpu-health": ("nvidia.com/gpu.health", "unhealthy"),
}
WAIT_S = 300
STEPS = ("seen", "deleting", "gone", "created", "running")


@dataclass
class Recovery:
    """One repetition, by a pod watch: when each pod of each attempt was seen in each state."""

    job: str
    pods: int
    first: dict[str, str] = field(default_factory=dict)  # attempt 1: pod name -> node
    at: dict[str, float] = field(default_factory=dict)  # step -> when
    created: set[str] = field(default_factory=set)  # attempt 2's pods
    running: set[str] = field(default_factory=set)
    deleting: set[str] = field(default_factory=set)  # attempt 1's
    gone: set[str] = field(default_factory=set)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def pod_event(self, pod: dict[str, Any], deleted: bool) -> None:
        meta, status = pod["metadata"], pod.get("status") or {}
        labels = meta.get("labels") or {}
        if labels.get(JOB_LABEL) != self.job:
            return
        name, attempt, now = meta["name"], labels.get(ATTEMPT_LABEL), clock()
        if attempt == "1":
            if status.get("phase") == "Running":
                self.first.setdefault(name, (pod.get("spec") or {}).get("nodeName", ""))
            if "fault" in self.at:
                ended = deleted or meta.get("deletionTimestamp") or status.get("phase") == "Failed"
                if ended or _disrupted(status):
                    self.at.setdefault("seen", now)
                if deleted or meta.get("deletionTimestamp"):
                    self.deleting.add(name)
                if deleted:
                    self.gone.add(name)
        elif attempt == "2" and not deleted:
            self.created.add(name)
            if status.get("phase") == "Running":
                self.running.add(name)
        for step, pods in (
            ("deleting", self.deleting),
            ("gone", self.gone),
            ("created", self.created),
            ("running", self.running),
        ):
            if len(pods) >= self.pods:
                self.at.setdefault(step, now)
        self.changed.set()

    async def wait(self, done: Callable[[], bool], limit_s: float = WAIT_S) -> None:
        async with asyncio.timeout(limit_s):
            while not done():
                self.changed.clear()
                await self.changed.wait()

    def durations(self) -> dict[str, float]:
        t0 = self.at["fault"]
        out = {step: self.at[step] - t0 for step in STEPS}
        out["operator"] = (self.at["deleting"] - self.at["seen"]) + (
            self.at["created"] - self.at["gone"]
        )
        return out


def _disrupted(status: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def job_manifest(name: str, pods: int, run_id: str, grace_seconds: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "trainer", "image": "trainer:bench"}],
        "nodeSelector": {RUN_LABEL: run_id},
        "tolerations": [
            {"key": RUN_LABEL, "operator": "Equal", "value": run_id, "effect": "NoSchedule"},
            {
                "key": UNREACHABLE,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 0,
            },
        ],
        "terminationGracePeriodSeconds": grace_seconds,
    }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MultiGPUJob",
        "metadata": {"name": name},
        "spec": {
            "mode": "DistributedDataParallel",
            "replicas": pods,
            "gpusPerReplica": 1,
            "runPolicy": {"restartPolicy": "OnFailure", "backoffLimit": 0},
            "template": {
                "metadata": {"annotations": {"sim.multigpu.dev/succeed-after": "3600s"}},
                "spec": spec,
            },
        },
    }


@dataclass
class Bench:
    args: argparse.Namespace
    api: client.ApiClient
    namespace: str
    run_id: str

    async def taint(self, node: str, add: bool) -> None:
        core = client.CoreV1Api(self.api)
        key, value = FAULT_TAINTS[self.args.fault]
        taints = [t for t in (await core.read_node(node)).spec.taints or [] if t.key != key]
        if add:
            taints.append(client.V1Taint(key=key, value=value or None, effect="NoExecute"))
        await core.patch_node(node, {"spec": {"taints": taints}})

    async def keep_tainted(self, node: str, rec: Recovery) -> None:
        """Put the taint back while no pod has been seen ended (see the module's docstring)."""
        core = client.CoreV1Api(self.api)
        key = FAULT_TAINTS[self.args.fault][0]
        while "seen" not in rec.at:
            await asyncio.sleep(0.5)
            node_obj = await core.read_node(node)
            if "seen" not in rec.at and not any(t.key == key for t in node_obj.spec.taints or []):
                await self.taint(node, add=True)

    async def repetition(self, index: int) -> dict[str, float]:
        custom = client.CustomObjectsApi(self.api)
        core = client.CoreV1Api(self.api)
        name = f"rec-{index}"
        rec = Recovery(name, self.args.pods)

        def pods(**kwargs: Any) -> Any:
            return core.list_namespaced_pod(
                self.namespace, label_selector=f"{JOB_LABEL}={name}", **kwargs
            )

        watching = asyncio.create_task(watch(pods, rec.pod_event))
        manifest = job_manifest(name, self.args.pods, self.run_id, self.args.grace_seconds)
        await custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, manifest
        )
        try:
            await rec.wait(lambda: len(rec.first) >= rec.pods)
            nodes = list(rec.first.values())
            bad = max(set(nodes), key=nodes.count)
            rec.at["fault"] = clock()
            await self.taint(bad, add=True)
            keeping = asyncio.create_task(self.keep_tainted(bad, rec))
            try:
                await rec.wait(lambda: "running" in rec.at)
            finally:
                keeping.cancel()
                await self.taint(bad, add=False)
            job = await custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name
            )
            status = job.get("status") or {}
            print(
                f"repetition {index}: {nodes.count(bad)} of {len(nodes)} pods on {bad}; "
                f"attempt {status.get('attempt')}, restarts {status.get('restarts')}, "
                f"infrastructureRestarts {status.get('infrastructureRestarts')}, "
                f"fault {(status.get('lastFailure') or {}).get('fault')}, "
                f"avoidedNodes {status.get('avoidedNodes')}",
                flush=True,
            )
            out = rec.durations()
            print("  " + ", ".join(f"{k} {v:.2f} s" for k, v in out.items()), flush=True)
            return out
        finally:
            watching.cancel()
            await custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name
            )
            # The next job starts on free nodes: this one's pods gone first.
            for _ in range(WAIT_S * 2):
                if not (await core.list_namespaced_pod(self.namespace)).items:
                    break
                await asyncio.sleep(0.5)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=64, help="pods of the job, one GPU each")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (median printed)")
    parser.add_argument("--fault", choices=sorted(FAULT_TAINTS), default="unreachable")
    parser.add_argument(
        "--grace-seconds", type=int, default=30, help="the pods' terminationGracePeriodSeconds"
    )
    parser.add_argument("--cluster", default=TEST_NAME, help="the local cluster's name")
    return parser.parse_args()


async def main_async(args: argparse.Namespace) -> None:
    cluster = LocalCluster(build_tools(), args.cluster)
    cluster.up(gpu_nodes=0, cpu_nodes=0, real_node=False)
    cluster.install_crds(REPO / "manifests/crd")
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
    cfg.connection_pool_maxsize = 16
    api = client.ApiClient(cfg)
    run_id = uuid.uuid4().hex[:8]
    count = -(-args.pods // GPUS_PER_NODE) + 1  # one to spare
    nodes = [gpu_node(f"recovery-{run_id}-{i}", GPUS_PER_NODE) for i in range(count)]
    for node in nodes:
        node["metadata"]["labels"][RUN_LABEL] = run_id
        node["spec"]["taints"].append({"key": RUN_LABEL, "value": run_id, "effect": "NoSchedule"})
    namespace = f"bench-recovery-{run_id}"
    cluster.kubectl(
        "create", "-f", "-", stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": nodes})
    )
    cluster.kubectl("create", "namespace", namespace)
    operator = OperatorProcess(cluster.kubeconfig, namespace, Path(f"/tmp/{namespace}.log"))
    try:
        cluster.wait_nodes_ready([n["metadata"]["name"] for n in nodes], timeout=120)
        operator.start()
        bench = Bench(args, api, namespace, run_id)
        runs = [await bench.repetition(i) for i in range(args.repeat)]
        print(
            f"\n{args.pods} pods on {count} nodes x {GPUS_PER_NODE} GPUs, fault {args.fault}, "
            f"grace {args.grace_seconds} s; median of {len(runs)}, seconds from the taint:"
        )
        for key in (*STEPS, "operator"):
            values = [r[key] for r in runs]
            spread = ", ".join(f"{v:.2f}" for v in values)
            print(f"  {key:>9}: {statistics.median(values):6.2f}  ({spread})")
    finally:
        operator.stop()
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        try:
            await client.CoreV1Api(api).delete_collection_node(
                label_selector=f"{RUN_LABEL}={run_id}"
            )
        finally:
            await api.close()


def main() -> None:
    asyncio.run(main_async(parse_args()))


if __name__ == "__main__":
    main()
