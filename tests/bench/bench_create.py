"""Benchmark: the operator against the bare client, on the goals of issue 15.

Not a test: it prints figures, never asserts on time. Run against the local cluster
(docs/benchmarks.md has the command lines and recorded runs):

    .venv/bin/python tests/bench/bench_create.py --nodes 200 --jobs 100 --pods 8

It adds `--nodes` simulated 8-GPU nodes (removed afterwards), starts the operator as a
real process watching a fresh namespace with `--existing` suspended jobs in it, and
submits `--jobs` MultiGPUJobs of `--pods` pods, all at once or at `--rate` jobs/s
(`--duration` seconds of it sets the job count). Watches time each job's pods and
status. Then `--cycles` times the jobs are deleted and created again (the operator's
memory across cycles). Last, in another fresh namespace, a bare async client creates the
same pods on the same schedule: what the API server allows, the bar each figure is
printed against. `--results DIR` writes the run's figures as a JSON file there
(docs/bench-results/, from which docs/benchmarks.md is generated). `--profile FILE`
samples the operator with py-spy during the jobs' submission and prints the top
functions; `--plane-profile DIR` records the API server's own CPU profile in each phase
(go tool pprof -top DIR/operator.pprof). The control plane's CPU per job is split by
program, and its idle draw (the nodes' heartbeats) is read before the first phase.
`--direct` adds a third client that sends the operator's own objects for each job
itself, in the operator's order: meant to tell the operator's own share of the wait from
what the job's objects cost the cluster, though as the run's last phase, sending every
job at once, it also measures its own burst and the cluster's state (docs/benchmarks.md,
"What a job costs the control plane"). `--fresh` stops the local cluster and starts a
new one first (a cluster reused across large runs grows slower).

A run whose pods do not fit the nodes' GPUs is refused up front. The operator's figures
print as soon as its phase ends, the full report with the ratios at the very end; a line
on stderr every 30 s tells how far the current phase has got.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import plane_profile
from bench.metrics_text import growth, mean_growth
from bench.objects import BARE_LABEL, MEASURED, NORMAL_START, DirectClient, job_manifest
from bench.observe import (
    Timeline,
    clock,
    control_plane_cpu_by_process,
    cpu_seconds,
    idle_control_plane,
    ms_per_job,
    operator_events,
    report_progress,
    rss_mib,
    start_watches,
)
from bench.options import GPUS_PER_NODE, parse_args
from bench.report import Figures, print_report
from bench.results import BENCH_CREATE, code_of, command_line, figures_dict, record, size_of, write
from bench.sampling import Sampler, top

from cluster.localcluster import LocalCluster
from cluster.node_manifests import gpu_node
from cluster.tools import build_tools
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from support.operator_process import OperatorProcess

REPO = Path(__file__).resolve().parents[2]
JOB_LABEL = "multigpu.dev/job-name"
RUN_LABEL = "bench.multigpu.dev/run"  # on this run's nodes
WAIT_S = 900
SETTLE_S = 20


async def submit_all(
    names: list[str], rate: float, submit: Callable[[str], Awaitable[Any]]
) -> dict[str, float]:
    """Submit every name, all at once (rate 0) or `rate` a second; when each was sent."""
    start = clock()
    submitted: dict[str, float] = {}

    async def one(i: int, name: str) -> None:
        if rate:
            await asyncio.sleep(max(0.0, start + i / rate - clock()))
        submitted[name] = clock()
        await submit(name)

    await asyncio.gather(*(one(i, name) for i, name in enumerate(names)))
    return submitted


def latencies(submitted: dict[str, float], done: Callable[[str], float | None]) -> list[float]:
    return sorted(t - submitted[j] for j in submitted if (t := done(j)) is not None)


def p99(values: list[float]) -> float:
    return values[min(len(values) - 1, int(0.99 * len(values)))] if values else float("nan")


def creation_figures(
    timeline: Timeline, submitted: dict[str, float], pods: int, figures: Figures
) -> None:
    created = latencies(submitted, lambda j: timeline.all_created(j, pods))
    last = max(t for j in submitted if (t := timeline.all_created(j, pods)) is not None)
    figures.jobs_per_s = len(submitted) / (last - min(submitted.values()))
    figures.p50_created_s = statistics.median(created)
    figures.p99_created_s = p99(created)


@dataclass
class Run:
    args: argparse.Namespace
    api: client.ApiClient
    cluster: LocalCluster
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    async def create_job(self, namespace: str, name: str, suspend: bool = False) -> None:
        manifest = job_manifest(name, self.args.pods, suspend, self.args.dns_names)
        await self.custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, manifest
        )

    async def operator(self, namespace: str) -> Figures:
        args, figures = self.args, Figures()
        proc = OperatorProcess(
            self.cluster.kubeconfig, namespace, Path(f"/tmp/bench-operator-{namespace}.log")
        )
        proc.start()
        assert proc.proc is not None
        pid = proc.proc.pid
        timeline = Timeline(JOB_LABEL)
        watches = start_watches(self.api, namespace, timeline)
        watches.append(asyncio.create_task(report_progress("operator", timeline, args.pods)))
        try:
            old = [f"old-{i}" for i in range(args.existing)]
            timeline.watching, timeline.step = old, "existing jobs"
            await submit_all(old, 0, lambda n: self.create_job(namespace, n, suspend=True))
            await timeline.wait(
                lambda: all(timeline.job_phase.get(n) == "Suspended" for n in old), WAIT_S
            )
            before = proc.metrics()
            cpu_before = cpu_seconds(pid)
            cluster_dir = self.cluster.kubeconfig.parent
            plane_before = control_plane_cpu_by_process(cluster_dir, pid)
            sampler = Sampler(pid, Path(args.profile)) if args.profile else None
            profiling = self.plane_profile("operator", figures)
            names = [f"job-{i}" for i in range(args.jobs)]
            timeline.watching, timeline.step = names, ""
            submitted = await submit_all(names, args.rate, lambda n: self.create_job(namespace, n))
            await timeline.wait(lambda: all(j in timeline.job_running for j in names), WAIT_S)
            if sampler is not None:
                sampler.stop()
                figures.profile = top(sampler.path)
            await asyncio.sleep(2)  # the last status writes and Events land
            after = proc.metrics()
            creation_figures(timeline, submitted, args.pods, figures)
            reported = latencies(
                {j: t for j in names if (t := timeline.all_running(j, args.pods)) is not None},
                timeline.job_running.get,
            )
            figures.p99_running_s = p99(reported)
            figures.p50_running_s = statistics.median(reported)
            figures.requests_per_job, figures.requests_by_kind = requests(before, after, len(names))
            figures.waits = waits(before, after)
            posted = await operator_events(self.api, namespace, set(names))
            figures.events_per_job = posted / len(names)
            reconciles = sum(growth(before, after, "mgj_reconcile_duration_seconds_count").values())
            used = cpu_seconds(pid) - cpu_before
            figures.cpu_per_reconcile_ms = 1000 * used / reconciles
            figures.cpu_per_job_ms = 1000 * used / len(names)
            plane = control_plane_cpu_by_process(cluster_dir, pid)
            figures.set_control_plane(ms_per_job(plane_before, plane, len(names)))
            figures.rss_mib = rss_mib(pid)
            figures.peak_rss_mib = rss_mib(pid, "VmHWM")
            # Watching, no longer creating: the connections of the burst close when idle
            # (aiohttp's keep-alive, 15 s) and their buffers go.
            await asyncio.sleep(SETTLE_S)
            figures.settled_rss_mib = rss_mib(pid)
            figures.cycle_rss_mib = await self.cycles(namespace, timeline, pid)
            if profiling is not None:
                await profiling
            return figures
        finally:
            for task in watches:
                task.cancel()
            proc.stop()

    def plane_profile(self, phase: str, figures: Figures) -> asyncio.Task[None] | None:
        """With `--plane-profile DIR`, the API server's CPU profile over the phase's first
        `--plane-profile-s` seconds, from the submission on, into DIR/<phase>.pprof."""
        if not self.args.plane_profile:
            return None
        path = Path(self.args.plane_profile) / f"{phase}.pprof"
        figures.plane_profile = str(path)
        return plane_profile.start(self.cluster, path, self.args.plane_profile_s)

    async def cycles(self, namespace: str, timeline: Timeline, pid: int) -> list[float]:
        """Delete the jobs and create them again, `--cycles` times: RSS after each."""
        rss = []
        for cycle in range(self.args.cycles):
            timeline.step = f"cycle {cycle + 1}/{self.args.cycles}, deleting"
            await self.custom.delete_collection_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, label_selector=MEASURED
            )
            await timeline.wait(lambda: not any(timeline.created.values()), WAIT_S)
            names = [f"c{cycle}-{i}" for i in range(self.args.jobs)]
            timeline.watching, timeline.step = names, f"cycle {cycle + 1}/{self.args.cycles}"
            await submit_all(names, self.args.rate, lambda n: self.create_job(namespace, n))
            await timeline.wait(partial(_all_running, timeline, names), WAIT_S)
            rss.append(rss_mib(pid))
        return rss

    async def bare(self, namespace: str, direct: bool = False) -> Figures:
        """The bare client's pods; with `direct`, the operator's own objects for each job
        sent straight (objects.DirectClient): what the API server allows for them."""
        args, figures = self.args, Figures()
        parts = set(NORMAL_START) if direct else {"pods"}
        sender = DirectClient(self.api, namespace, parts, args.pods, args.dns_names)
        timeline = Timeline(JOB_LABEL if direct else BARE_LABEL)
        phase = "direct client" if direct else "bare client"
        watches = start_watches(self.api, namespace, timeline)
        watches.append(asyncio.create_task(report_progress(phase, timeline, args.pods)))
        try:
            await asyncio.sleep(0.5)
            names = [f"job-{i}" for i in range(args.jobs)]
            timeline.watching = names
            cluster_dir = self.cluster.kubeconfig.parent
            plane_before = control_plane_cpu_by_process(cluster_dir)
            profiling = self.plane_profile(phase.replace(" ", "-"), figures)
            submitted = await submit_all(names, args.rate, sender.job)
            await timeline.wait(
                lambda: all(timeline.all_created(j, args.pods) for j in names), WAIT_S
            )
            creation_figures(timeline, submitted, args.pods, figures)
            await timeline.wait(partial(_all_pods_running, timeline, names, args.pods), WAIT_S)
            await asyncio.sleep(2)  # as for the operator: the last writes land
            plane = control_plane_cpu_by_process(cluster_dir)
            figures.set_control_plane(ms_per_job(plane_before, plane, len(names)))
            # The pods; sent directly, also the Service and two status writes.
            figures.requests_per_job = float(args.pods + (3 if direct else 0))
            if profiling is not None:
                await profiling
            return figures
        finally:
            for task in watches:
                task.cancel()


def _all_running(timeline: Timeline, names: list[str]) -> bool:
    return all(j in timeline.job_running for j in names)


def _all_pods_running(timeline: Timeline, names: list[str], pods: int) -> bool:
    return all(timeline.all_running(j, pods) is not None for j in names)


def waits(before: str, after: str) -> str:
    """Where the operator's jobs waited, from its own histograms: the mean wait in its work
    queue (a worker free?) and the mean answer time of its requests by kind (the API
    server's share)."""
    queue = mean_growth(before, after, "mgj_workqueue_queue_duration_seconds")
    kinds = mean_growth(before, after, "mgj_api_request_duration_seconds", ("verb", "resource"))
    times = [("queue wait", queue[""])] if "" in queue else []
    return ", ".join(f"{k}: {1000 * v:.0f}" for k, v in [*times, *sorted(kinds.items())])


def requests(before: str, after: str, jobs: int) -> tuple[float, str]:
    """The operator's requests per job from its own counter, list and watch left out
    (they are per operator, not per job), and the split by verb and resource. The
    goal counts the pods, the Service and the status writes: the Events it posts have
    their own goal, so they are in the split but not in the sum."""
    kinds = growth(before, after, "mgj_api_requests_total", ("verb", "resource"))
    per_job = {k: v / jobs for k, v in kinds.items() if k.split()[0] not in ("list", "watch")}
    split = ", ".join(f"{k}: {v:.2f}" for k, v in sorted(per_job.items()))
    return sum(v for k, v in per_job.items() if k != "create events"), split


async def bench_cluster(fresh: bool) -> tuple[LocalCluster, client.ApiClient]:
    """The local cluster (started, or the one running unless `fresh`) with the CRD
    installed, and a bare client of it with as many connections as the operator's default."""
    cluster = LocalCluster(build_tools())
    if fresh:
        cluster.down()
    cluster.up(gpu_nodes=0, cpu_nodes=0, real_node=False)
    cluster.install_crds(REPO / "manifests/crd")
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
    cfg.connection_pool_maxsize = 64
    return cluster, client.ApiClient(cfg)


async def main_async(args: argparse.Namespace) -> None:
    code = code_of(REPO)  # what the operator process will load, before others change it
    cluster, api = await bench_cluster(args.fresh)
    run = Run(args, api, cluster)
    nodes = [gpu_node(f"bench-{run.run_id}-{i}", GPUS_PER_NODE) for i in range(args.nodes)]
    for node in nodes:
        node["metadata"]["labels"][RUN_LABEL] = run.run_id
    cluster.kubectl(
        "create", "-f", "-", stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": nodes})
    )
    namespaces = [f"bench-{side}-{run.run_id}" for side in ("op", "bare", "direct")]
    for ns in namespaces:
        cluster.kubectl("create", "namespace", ns)
    try:
        idle = await idle_control_plane(cluster.kubeconfig.parent)
        op = await run.operator(namespaces[0])
        op.control_plane_idle_cores = idle
        print_report(args, op)
        # The bare client starts on a cluster as quiet as the operator's was: not while
        # the operator's pods are being deleted.
        print(f"deleting namespace {namespaces[0]}, then the bare client", file=sys.stderr)
        cluster.kubectl("delete", "namespace", namespaces[0], "--timeout=600s", check=False)
        bare = await run.bare(namespaces[1])
        direct = None
        if args.direct:
            print_report(args, op, bare)
            print(f"deleting namespace {namespaces[1]}, then the direct client", file=sys.stderr)
            cluster.kubectl("delete", "namespace", namespaces[1], "--timeout=600s", check=False)
            direct = await run.bare(namespaces[2], direct=True)
    finally:
        for ns in namespaces:
            cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        # One request for all the nodes: kubectl would send one per node, minutes for
        # 1,000 nodes on a busy API server.
        try:
            await client.CoreV1Api(api).delete_collection_node(
                label_selector=f"{RUN_LABEL}={run.run_id}"
            )
        finally:
            await api.close()
    print_report(args, op, bare, direct)
    if args.results:
        runs = {"operator": op, "bare": bare, "direct": direct}
        figures = {side: figures_dict(f) for side, f in runs.items()}
        command = command_line(sys.argv)
        rec = record(BENCH_CREATE, command, size_of(args), figures, args.note, code=code)
        print(f"results: {write(rec, Path(args.results))}")


def main() -> None:
    asyncio.run(main_async(parse_args(__doc__)))


if __name__ == "__main__":
    main()
