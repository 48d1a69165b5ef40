"""Benchmark: what each object of a MultiGPUJob costs the control plane.

Not a test: it prints figures, never asserts. The operator's jobs cost the cluster more
CPU than the bare client's pods (bench_create.py: "control plane CPU per job"); on a
machine where the control plane shares the cores, that sets the rate jobs can start at.
This tells the parts apart: no operator runs; the objects the operator would make are
made directly, `--jobs` groups of `--pods` pods at once, in a fresh namespace per case:

    pods                     the bare client's pods (bench_create.py's bar)
    pods+service             and a headless Service selecting them
    job+pods                 a MultiGPUJob (suspended) and the pods the operator plans for
                             it (plan/: its env, labels, owner reference), no Service
    job+pods+service         and the Service the operator plans (per-pod DNS names)
    job+pods+service+status  and two status writes with their Events, as for a normal start
    pods                     the first case again: how far the cluster drifted meanwhile

For each: the CPU each control-plane process used from submission until every pod runs
(and 5 s more for the last writes), and the API server's write requests, per job:

    .venv/bin/python tests/bench/bench_plane.py --jobs 100
    .venv/bin/python tests/bench/bench_plane.py --jobs 100 --dns-names Replica0

With `--results DIR` it writes the figures as a result file for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results
from bench.bench_create import bench_cluster
from bench.metrics_text import growth
from bench.objects import DirectClient
from bench.observe import control_plane_cpu_by_process, ms_per_job
from bench.options import GPUS_PER_NODE, add_cluster_options

from cluster.localcluster import LocalCluster
from cluster.node_manifests import gpu_node

BENCHMARK = "bench_plane"
CASES = ("pods", "pods+service", "job+pods", "job+pods+service", "job+pods+service+status")
SETTLE_S = 5


async def all_running(core: client.CoreV1Api, namespace: str, count: int) -> None:
    while True:
        listed = await core.list_namespaced_pod(namespace)
        if sum(p.status.phase == "Running" for p in listed.items) >= count:
            return
        await asyncio.sleep(1)


def writes(before: str, after: str) -> dict[str, float]:
    """The API server's write requests between two /metrics texts, by verb and resource."""
    by = ("verb", "resource", "subresource")
    found: dict[str, float] = {}
    for key, grew in sorted(growth(before, after, "apiserver_request_total", by).items()):
        verb, resource, sub = key.split(" ")
        if verb not in ("GET", "LIST", "WATCH"):
            kind = f"{verb} {resource}" + (f"/{sub}" if sub else "")
            found[kind] = found.get(kind, 0.0) + grew
    return found


async def measure(
    cluster: LocalCluster, api: client.ApiClient, name: str, args: argparse.Namespace
) -> dict[str, Any]:
    namespace = f"plane-{name.replace('+', '-')}-{int(time.time())}"
    cluster.kubectl("create", "namespace", namespace)
    await asyncio.sleep(SETTLE_S)  # the namespace's own writes land first
    case = DirectClient(api, namespace, set(name.split("+")), args.pods, args.dns_names)
    metrics_before = cluster.kubectl("get", "--raw", "/metrics").stdout
    cpu_before = control_plane_cpu_by_process(cluster.kubeconfig.parent)
    start = time.perf_counter()
    await asyncio.gather(*(case.job(f"job-{i}") for i in range(args.jobs)))
    await all_running(case.core, namespace, args.jobs * args.pods)
    took = time.perf_counter() - start
    await asyncio.sleep(SETTLE_S)
    cpu = control_plane_cpu_by_process(cluster.kubeconfig.parent)
    per_process = ms_per_job(cpu_before, cpu, args.jobs)
    counts = writes(metrics_before, cluster.kubectl("get", "--raw", "/metrics").stdout)
    split = ", ".join(f"{k} {v:.0f}" for k, v in sorted(per_process.items()))
    print(f"{name:26}{sum(per_process.values()):>8.0f} ms/job   {took:5.1f} s   ({split})")
    print(f"{'':26}writes/job: " + ", ".join(f"{k} {v / args.jobs:.2f}" for k, v in counts.items()))
    sys.stdout.flush()
    cluster.kubectl("delete", "namespace", namespace, "--timeout=600s", check=False)
    return {
        "case": name,
        "ms_per_job": sum(per_process.values()),
        "by_program": per_process,
        "seconds": took,
        "writes_per_job": {k: v / args.jobs for k, v in counts.items()},
    }


async def main_async(args: argparse.Namespace) -> None:
    cluster, api = await bench_cluster(args.fresh)
    count = -(-args.jobs * args.pods // GPUS_PER_NODE)
    nodes = [gpu_node(f"plane-{i}", GPUS_PER_NODE) for i in range(count)]
    items = json.dumps({"kind": "List", "apiVersion": "v1", "items": nodes})
    cluster.kubectl("create", "-f", "-", stdin=items)
    print(
        f"\n{args.jobs} jobs x {args.pods} pods at once, {count} nodes: control plane CPU "
        "per job, submission -> all pods Running (+5 s)"
    )
    try:
        cases = [await measure(cluster, api, name, args) for name in (*CASES, CASES[0])]
    finally:
        await api.close()
        cluster.kubectl("delete", "node", *[n["metadata"]["name"] for n in nodes], check=False)
    if args.results:
        command = results.recorded_command("tests/bench/bench_plane.py", sys.argv[1:])
        size = {"jobs": args.jobs, "pods": args.pods, "nodes": count, "dns_names": args.dns_names}
        rec = results.record(BENCHMARK, command, size, {"cases": cases}, args.note)
        print(f"wrote {results.write(rec, args.results)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--pods", type=int, default=8, help="pods per job, one GPU each")
    add_cluster_options(parser)
    parser.add_argument("--results", type=Path, help="write a result file into this folder")
    parser.add_argument("--note", default="", help="said beside the run on the page")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
