"""What the benchmark measures, seen from outside the operator: watches that time each
job's pods and status, the Events posted on the jobs, and the operator process's memory
and CPU (from /proc). Times are time.perf_counter() of this process."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from multigpu_operator.api.spec import GROUP, PLURAL, VERSION

clock = time.perf_counter
NODES_SETTLE_S = 15  # new nodes registered and Ready before the idle draw is read
# The nodes' heartbeats come in bursts: a 15 s window read 0.03 cores of a 1,000-node
# cluster's idle draw, a 60 s one 0.17.
IDLE_S = 45
CLIENTS = {"kubectl"}  # given the cluster's kubeconfig too, but not the control plane


@dataclass
class Timeline:
    """Per job: when each pod was first seen, when each was first Running, when the job's
    status first said Running."""

    label: str  # the pod label naming the job
    created: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    running: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    job_running: dict[str, float] = field(default_factory=dict)
    job_phase: dict[str, str] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    # What the run is at now, for progress(): the jobs it waits on and, if any, a step.
    watching: list[str] = field(default_factory=list)
    step: str = ""

    def pod_event(self, pod: dict[str, Any], deleted: bool = False) -> None:
        meta = pod["metadata"]
        job = (meta.get("labels") or {}).get(self.label)
        if not job:
            return
        if deleted:
            self.created[job].pop(meta["name"], None)
            self.running[job].pop(meta["name"], None)
            if not self.created[job]:
                del self.created[job]
            self.changed.set()
            return
        t = clock()
        self.created[job].setdefault(meta["name"], t)
        if (pod.get("status") or {}).get("phase") == "Running":
            self.running[job].setdefault(meta["name"], t)
        self.changed.set()

    def job_event(self, job: dict[str, Any], deleted: bool = False) -> None:
        name, phase = job["metadata"]["name"], (job.get("status") or {}).get("phase", "")
        self.job_phase[name] = phase
        if phase == "Running":
            self.job_running.setdefault(name, clock())
        self.changed.set()

    def all_created(self, job: str, pods: int) -> float | None:
        """When the last of the job's `pods` pods was first seen, if all were."""
        times = self.created.get(job, {})
        return max(times.values()) if len(times) >= pods else None

    def all_running(self, job: str, pods: int) -> float | None:
        times = self.running.get(job, {})
        return max(times.values()) if len(times) >= pods else None

    def progress(self, pods: int) -> str:
        """How far the jobs in `watching` have got. A job with a status (the operator's)
        counts as Running by it, one without (the bare client's) by its pods."""
        jobs = self.watching
        running = sum(
            j in self.job_running if j in self.job_phase else self.all_running(j, pods) is not None
            for j in jobs
        )
        suspended = sum(self.job_phase.get(j) == "Suspended" for j in jobs)
        created = sum(len(self.created.get(j, {})) for j in jobs)
        pods_running = sum(len(self.running.get(j, {})) for j in jobs)
        return (
            f"{running}/{len(jobs)} jobs Running"
            + (f", {suspended} Suspended" if suspended else "")
            + f", {created}/{len(jobs) * pods} pods created, {pods_running} Running"
        )

    async def wait(self, done: Callable[[], bool], limit_s: float) -> None:
        async with asyncio.timeout(limit_s):
            while not done():
                self.changed.clear()
                await self.changed.wait()


async def report_progress(phase: str, timeline: Timeline, pods: int, every_s: float = 30) -> None:
    """A line on stderr every `every_s` until cancelled: a long run shows it is alive and
    how far it has got (the figures come only at the end of each phase)."""
    start = clock()
    while True:
        await asyncio.sleep(every_s)
        step = f", {timeline.step}" if timeline.step else ""
        line = f"{phase}{step}: {timeline.progress(pods)} ({clock() - start:.0f} s)"
        print(line, file=sys.stderr, flush=True)


async def watch(
    list_call: Callable[..., Any], on_object: Callable[[dict[str, Any], bool], None]
) -> None:
    """List then watch forever (until cancelled), handing every object to `on_object`."""
    while True:
        listed = json.loads(await (await list_call(_preload_content=False)).read())
        for item in listed["items"]:
            on_object(item, False)
        rv = listed["metadata"]["resourceVersion"]
        try:
            async for event in _events(list_call, rv):
                if event["type"] == "ERROR":
                    break  # expired: list again
                if event["type"] != "BOOKMARK":
                    on_object(event["object"], event["type"] == "DELETED")
        except TimeoutError:
            continue


async def _events(list_call: Callable[..., Any], rv: str) -> AsyncIterator[dict[str, Any]]:
    while True:
        resp = await list_call(
            watch=True,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=240,
            _preload_content=False,
            _request_timeout=300,
        )
        async with resp:
            async for line in resp.content:
                event = json.loads(line)
                if event["type"] != "ERROR":
                    rv = event["object"]["metadata"].get("resourceVersion", rv)
                yield event


def start_watches(
    api: client.ApiClient, namespace: str, timeline: Timeline
) -> list[asyncio.Task[None]]:
    """Watch the namespace's pods and (if any) MultiGPUJobs into `timeline`."""
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)

    def pods(**kwargs: Any) -> Any:
        return core.list_namespaced_pod(namespace, **kwargs)

    def jobs(**kwargs: Any) -> Any:
        return custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, **kwargs)

    return [
        asyncio.create_task(watch(pods, timeline.pod_event)),
        asyncio.create_task(watch(jobs, timeline.job_event)),
    ]


async def operator_events(api: client.ApiClient, namespace: str, jobs: set[str]) -> int:
    """Events on the MultiGPUJobs named `jobs` in `namespace` (only the operator posts
    Events on MultiGPUJobs)."""
    resp = await client.EventsV1Api(api).list_namespaced_event(namespace, _preload_content=False)
    items = json.loads(await resp.read())["items"]
    return sum(
        (e.get("regarding") or {}).get("kind") == "MultiGPUJob"
        and (e.get("regarding") or {}).get("name") in jobs
        for e in items
    )


def rss_mib(pid: int, field_name: str = "VmRSS") -> float:
    """The process's resident set (VmRSS) or its high-water mark (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ms_per_job(before: dict[str, float], after: dict[str, float], jobs: int) -> dict[str, float]:
    """Each program's CPU between two `control_plane_cpu_by_process` readings, in ms per
    job: which of them a job's objects keep busy."""
    return {name: 1000 * (used - before.get(name, 0.0)) / jobs for name, used in after.items()}


def control_plane_cpu_by_process(
    cluster_dir: Path, leave_out: int | None = None
) -> dict[str, float]:
    """CPU seconds used so far by each of the local control plane's programs (kube-apiserver,
    etcd, kube-controller-manager, kube-scheduler, kwok-controller: kwokctl starts each with
    files of the cluster's directory), `leave_out` aside."""
    marker = str(cluster_dir).encode()
    used: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (leave_out, os.getpid()):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            if marker not in cmdline:
                continue
            program = Path(cmdline.split(b"\0")[0].decode(errors="replace")).name
            if program not in CLIENTS:
                used[program] = used.get(program, 0.0) + cpu_seconds(int(entry.name))
        except (OSError, IndexError):
            continue  # gone meanwhile
    return used


async def idle_control_plane(cluster_dir: Path) -> float:
    """The control plane's CPU (cores) with nothing submitted, after the new nodes'
    registration settles: the nodes' heartbeats and leases, which every phase's CPU per
    job includes for as long as the phase lasts."""
    await asyncio.sleep(NODES_SETTLE_S)
    before, start = sum(control_plane_cpu_by_process(cluster_dir).values()), clock()
    await asyncio.sleep(IDLE_S)
    after = sum(control_plane_cpu_by_process(cluster_dir).values())
    return (after - before) / (clock() - start)
