"""The real node's own life: a second `up` reuses what runs, and `down` leaves nothing of
it on this machine (no process, mount, cgroup, network namespace or link; the machine's
sysctls as they were). On a cluster of its own, so the suite's cluster is not disturbed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.localcluster import LocalCluster
from cluster.realnode_config import ENV_MARKER, NODE_NAME, PAUSE_IMAGE
from cluster.tools import build_tools
from support.real_pods import TOLERATION
from support.waiting import wait_for

pytestmark = pytest.mark.cluster

SYSCTLS = (
    "net/ipv4/ip_forward",
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
)


def sysctls() -> dict[str, str]:
    return {key: Path("/proc/sys", key).read_text().strip() for key in SYSCTLS}


@pytest.fixture
def throwaway() -> Iterator[LocalCluster]:
    cluster = LocalCluster(build_tools(), "mgj-node-life")
    yield cluster
    cluster.down()


def test_up_reuses_and_down_leaves_nothing(throwaway: LocalCluster) -> None:
    before = sysctls()
    throwaway.up(gpu_nodes=0, cpu_nodes=0, pull_images=False)
    node = throwaway.real_node
    pids = sorted(p.read_text() for p in node.layout.run.glob("*.pid"))
    # A pod of its own makes a sandbox: a network namespace, mounts and cgroups to remove.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sleeper", "namespace": "default"},
        "spec": {
            "nodeName": NODE_NAME,
            "tolerations": [TOLERATION],
            "containers": [{"name": "pause", "image": PAUSE_IMAGE}],
        },
    }
    throwaway.kubectl("apply", "-f", "-", stdin=json.dumps(pod))

    def running() -> bool:
        out = throwaway.kubectl("get", "pod", "sleeper", "-o", "json").stdout
        return bool(json.loads(out).get("status", {}).get("phase") == "Running")

    wait_for(running, "a pod on the real node", timeout=60)
    assert node.running(), "the node's processes, mounts and namespace exist"
    throwaway.up(gpu_nodes=0, cpu_nodes=0, pull_images=False)  # a second up
    assert sorted(p.read_text() for p in node.layout.run.glob("*.pid")) == pids
    throwaway.down()
    assert node.running() == []
    assert not Path(f"/run/netns/{node.layout.netns}").exists()
    assert not any(
        (root / node.layout.cgroup_root.lstrip("/")).exists()
        for root in Path("/sys/fs/cgroup").iterdir()
    )
    assert sysctls() == before
    marker = f"{ENV_MARKER}={throwaway.name}".encode()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            assert marker not in environ.read_bytes().split(b"\0"), environ
        except OSError:
            continue
