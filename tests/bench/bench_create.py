"""Benchmark: how fast does the operator turn N jobs of M pods into pods?

Not a test: it prints figures, never asserts on time. Run against the local cluster:

    .venv/bin/python tests/bench/bench_create.py --jobs 200 --pods 8

It adds `--jobs * --pods / 8` simulated GPU nodes (removed afterwards), starts the
operator as a real process watching a fresh namespace, submits N MultiGPUJobs at
once, and watches pods arrive. Then, in another fresh namespace, a bare async
client creates the same N*M pods as fast as it can: the ceiling. Printed:
jobs/s, p50/p99 latency from a job's submission to the last of its pods being
created (seen on a watch), API requests per job (the operator's own counter),
the operator's peak RSS, and each figure's ratio to the bare client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster.localcluster import LocalCluster, build_tools, gpu_node
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from support.operator_process import OperatorProcess

REPO = Path(__file__).resolve().parents[2]


def job_manifest(name: str, pods: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MultiGPUJob",
        "metadata": {"name": name},
        "spec": {
            "mode": "DistributedDataParallel",
            "replicas": pods,
            "gpusPerReplica": 1,
            "template": {"spec": {"containers": [{"name": "trainer", "image": "trainer:bench"}]}},
        },
    }


def bare_pod(name: str, job: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench/job": job}},
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "image": "trainer:bench",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "restartPolicy": "Never",
        },
    }


async def watch_pod_arrivals(
    core: client.CoreV1Api, namespace: str, label: str, want: int, arrivals: dict[str, list[float]]
) -> None:
    """Record, per job, the time each of its pods is first seen (ADDED)."""
    seen = 0
    listed = json.loads(
        await (await core.list_namespaced_pod(namespace, _preload_content=False)).read()
    )
    rv = listed["metadata"]["resourceVersion"]
    while seen < want:
        resp = await core.list_namespaced_pod(
            namespace,
            watch=True,
            resource_version=rv,
            timeout_seconds=300,
            _preload_content=False,
            _request_timeout=600,
        )
        async with resp:
            async for line in resp.content:
                event = json.loads(line)
                rv = event["object"]["metadata"].get("resourceVersion", rv)
                if event["type"] != "ADDED":
                    continue
                job = event["object"]["metadata"].get("labels", {}).get(label)
                if job:
                    arrivals.setdefault(job, []).append(time.perf_counter())
                    seen += 1
                    if seen >= want:
                        return


def summarise(
    submitted: dict[str, float], arrivals: dict[str, list[float]], pods: int
) -> dict[str, float]:
    latencies = sorted(max(arrivals[j][:pods]) - t0 for j, t0 in submitted.items())
    start = min(submitted.values())
    end = max(max(a) for a in arrivals.values())
    return {
        "jobs_per_s": len(submitted) / (end - start),
        "p50_s": statistics.median(latencies),
        "p99_s": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "total_s": end - start,
    }


def peak_rss_kib(pid: int) -> int:
    """The process's high-water resident set size (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


async def run_operator(
    api: client.ApiClient, cluster: LocalCluster, namespace: str, jobs: int, pods: int
) -> tuple[dict[str, float], float, int]:
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    proc = OperatorProcess(
        cluster.kubeconfig, namespace, Path(f"/tmp/bench-operator-{namespace}.log")
    )
    proc.start()
    try:
        arrivals: dict[str, list[float]] = {}
        watcher = asyncio.create_task(
            watch_pod_arrivals(core, namespace, "multigpu.dev/job-name", jobs * pods, arrivals)
        )
        await asyncio.sleep(0.5)
        submitted: dict[str, float] = {}

        async def submit(name: str) -> None:
            submitted[name] = time.perf_counter()
            await custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, job_manifest(name, pods)
            )

        await asyncio.gather(*(submit(f"job-{i}") for i in range(jobs)))
        await asyncio.wait_for(watcher, timeout=600)
        figures = summarise(submitted, arrivals, pods)
        await asyncio.sleep(2)  # let status writes for the last jobs land before counting
        requests = sum(
            float(line.split()[-1])
            for line in proc.metrics().splitlines()
            if line.startswith("mgj_api_requests_total{")
        )
        assert proc.proc is not None
        return figures, requests / jobs, peak_rss_kib(proc.proc.pid)
    finally:
        proc.stop()


async def run_bare(api: client.ApiClient, namespace: str, jobs: int, pods: int) -> dict[str, float]:
    core = client.CoreV1Api(api)
    arrivals: dict[str, list[float]] = {}
    watcher = asyncio.create_task(
        watch_pod_arrivals(core, namespace, "bench/job", jobs * pods, arrivals)
    )
    await asyncio.sleep(0.5)
    submitted: dict[str, float] = {}

    async def submit(job: str) -> None:
        submitted[job] = time.perf_counter()
        await asyncio.gather(
            *(
                core.create_namespaced_pod(namespace, bare_pod(f"{job}-{i}", job))
                for i in range(pods)
            )
        )

    await asyncio.gather(*(submit(f"job-{i}") for i in range(jobs)))
    await asyncio.wait_for(watcher, timeout=600)
    return summarise(submitted, arrivals, pods)


async def main_async(args: argparse.Namespace) -> None:
    cluster = LocalCluster(build_tools())
    cluster.up()
    cluster.install_crds(REPO / "manifests/crd")
    run_id = uuid.uuid4().hex[:6]
    nodes = [gpu_node(f"bench-{run_id}-{i}", 8) for i in range(max(1, args.jobs * args.pods // 8))]
    cluster.kubectl(
        "create", "-f", "-", stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": nodes})
    )
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
    cfg.connection_pool_maxsize = 64
    api = client.ApiClient(cfg)
    namespaces = [f"bench-op-{run_id}", f"bench-bare-{run_id}"]
    for ns in namespaces:
        cluster.kubectl("create", "namespace", ns)
    try:
        op, requests_per_job, rss_kib = await run_operator(
            api, cluster, namespaces[0], args.jobs, args.pods
        )
        bare = await run_bare(api, namespaces[1], args.jobs, args.pods)
    finally:
        await api.close()
        for ns in namespaces:
            cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        cluster.kubectl(
            "delete", "node", *[n["metadata"]["name"] for n in nodes], "--wait=false", check=False
        )

    print(f"N={args.jobs} jobs x M={args.pods} pods ({args.jobs * args.pods} pods)")
    print(f"{'':28}{'operator':>12}{'bare client':>14}{'ratio':>9}")
    for key, label in [
        ("jobs_per_s", "jobs/s"),
        ("p50_s", "p50 submit->all pods (s)"),
        ("p99_s", "p99 submit->all pods (s)"),
        ("total_s", "wall time (s)"),
    ]:
        print(f"{label:28}{op[key]:>12.3f}{bare[key]:>14.3f}{op[key] / bare[key]:>9.2f}")
    print(
        f"{'API requests per job':28}{requests_per_job:>12.1f}{args.pods:>14.1f}"
        f"{requests_per_job / args.pods:>9.2f}"
    )
    print(f"operator peak RSS: {rss_kib / 1024:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--pods", type=int, default=8)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
