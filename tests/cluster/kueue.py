"""Kueue's controller manager against a local cluster, out of cluster, as Kueue's own
development set-up runs it: its CRDs applied, its webhooks served on 127.0.0.1 with a
certificate from a CA made here and registered by URL, and MultiGPUJob declared as an
external framework (the operator creates and follows the jobs' Workloads itself).

Only Kueue's own kinds are admitted through its webhooks; none of its job integrations
(batch/v1 Job, plain pods, ...) is enabled, so nothing else on the cluster is queued.

    python tests/cluster/kueue.py up --cluster mgj-test
    python tests/cluster/kueue.py down --cluster mgj-test
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster import hostproc
from cluster.localcluster import LocalCluster
from cluster.tools import build_tools, module_dir

NAMESPACE = "kueue-system"
MULTIGPUJOB = "MultiGPUJob.v1alpha1.multigpu.dev"
ENV_MARKER = "MGJ_KUEUE"
# The webhooks of Kueue's own API; the others belong to job integrations we leave off.
OWN_WEBHOOK_PATH = "-kueue-x-k8s-io-"


class Kueue:
    def __init__(self, cluster: LocalCluster, manager: bool = False) -> None:
        """`manager`: the MultiKueue manager cluster (it dispatches MultiGPUJobs)."""
        self.cluster = cluster
        self.manager = manager
        self.dir = cluster.kubeconfig.parent / "kueue"
        self.module = module_dir("kueue", "sigs.k8s.io/kueue")

    @property
    def marker(self) -> str:
        return str(self.dir)

    def running(self) -> list[int]:
        return hostproc.marked_processes(ENV_MARKER, self.marker)

    def up(self, timeout: float = 120) -> None:
        """Start Kueue (or keep the one running) and wait until it serves its webhooks."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.running():
            ports = {name: hostproc.free_port() for name in ("webhook", "health", "metrics")}
            self._certificates()
            self.cluster.kubectl("create", "namespace", NAMESPACE, check=False)
            crds = self.module / "config/components/crd/bases"
            self.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds))
            self.cluster.kubectl(
                "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"
            )
            (self.dir / "config.yaml").write_text(yaml.safe_dump(self._config(ports)))
            self.cluster.kubectl(
                "apply", "-f", "-", stdin=json.dumps(self._webhooks(ports["webhook"]))
            )
            env = {
                **os.environ,
                "KUBECONFIG": str(self.cluster.kubeconfig),
                ENV_MARKER: self.marker,
            }
            # Built on first use (build_tools's LATE_TOOLS), or waited for when a test
            # session's background build has it in hand.
            kueue_bin = build_tools("kueue").kueue_bin
            argv = self._in_own_etc(
                str(kueue_bin / "kueue"),
                "--config", str(self.dir / "config.yaml"), "--zap-log-level=2",
                # The on-demand visibility API is an aggregated API server of its own,
                # with certificates at a fixed path; the tests read Workloads instead.
                "--feature-gates=VisibilityOnDemand=false",
            )  # fmt: skip
            hostproc.start_daemon("kueue", argv, self.dir, env)
            (self.dir / "ports.json").write_text(json.dumps(ports))
        ports = json.loads((self.dir / "ports.json").read_text())
        deadline = time.monotonic() + timeout
        while not _ok(f"http://127.0.0.1:{ports['health']}/readyz"):
            if not self.running():
                raise RuntimeError(f"kueue exited; see {self.dir / 'kueue.log'}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"kueue not ready after {timeout:.0f}s; see {self.dir / 'kueue.log'}"
                )
            time.sleep(0.5)

    def down(self) -> None:
        hostproc.stop(self.running())

    def log(self) -> str:
        path = self.dir / "kueue.log"
        return path.read_text(errors="replace")[-20000:] if path.exists() else ""

    def _config(self, ports: dict[str, int]) -> dict[str, Any]:
        config: dict[str, Any] = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['health']}"},
            "metrics": {"bindAddress": f"127.0.0.1:{ports['metrics']}"},
            "webhook": {
                "port": ports["webhook"],
                "host": "127.0.0.1",
                "certDir": str(self.dir / "certs"),
            },
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": [], "externalFrameworks": [MULTIGPUJOB]},
        }
        if self.manager:
            config["multiKueue"] = {"externalFrameworks": [{"name": MULTIGPUJOB}]}
        return config

    def _in_own_etc(self, *argv: str) -> list[str]:
        """`argv` in a mount namespace of its own whose /etc has Kueue's metrics certificate:
        without internal certificate management Kueue reads it from the fixed path
        /etc/kueue/metrics/certs. An overlay adds it there; the machine's /etc is untouched."""
        upper, work = self.dir / "etc" / "upper", self.dir / "etc" / "work"
        certs = upper / "kueue" / "metrics" / "certs"
        certs.mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            (certs / name).write_bytes((self.dir / "certs" / name).read_bytes())
        mount = f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={work} /etc"
        return [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f'{mount} && exec "$@"',
            "kueue",
            *argv,
        ]

    def _certificates(self) -> None:
        """A CA and a serving certificate for 127.0.0.1 (openssl, like any CA tooling)."""
        certs = self.dir / "certs"
        if (certs / "tls.crt").exists():
            return
        certs.mkdir(parents=True, exist_ok=True)
        ext = certs / "san.cnf"
        ext.write_text("subjectAltName=IP:127.0.0.1\n")
        key = ["-newkey", "rsa:2048", "-nodes"]
        ca = ["-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial"]
        for argv in (
            [
                "req",
                "-x509",
                *key,
                "-days",
                "3650",
                "-subj",
                "/CN=ca",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
            ],
            ["req", *key, "-subj", "/CN=127.0.0.1", "-keyout", "tls.key", "-out", "tls.csr"],
            [
                "x509",
                "-req",
                "-in",
                "tls.csr",
                *ca,
                "-days",
                "3650",
                "-extfile",
                "san.cnf",
                "-out",
                "tls.crt",
            ],
        ):
            subprocess.run(["openssl", *argv], cwd=certs, capture_output=True, check=True)

    def _webhooks(self, port: int) -> dict[str, Any]:
        """Kueue's webhook configurations, its own kinds only, called by URL."""
        docs = yaml.safe_load_all(
            (self.module / "config/components/webhook/manifests.yaml").read_text()
        )
        ca = (self.dir / "certs" / "ca.crt").read_bytes()
        bundle = base64.b64encode(ca).decode()
        items = []
        for doc in docs:
            if not doc:
                continue
            hooks = []
            for hook in doc["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                if OWN_WEBHOOK_PATH not in path:
                    continue
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{port}{path}",
                    "caBundle": bundle,
                }
                hooks.append(hook)
            doc["metadata"] = {"name": f"kueue-{doc['metadata']['name']}"}
            doc["webhooks"] = hooks
            items.append(doc)
        return {"apiVersion": "v1", "kind": "List", "items": items}


def _ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("command", choices=("up", "down"))
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--manager", action="store_true", help="the MultiKueue manager cluster")
    args = parser.parse_args(argv)
    kueue = Kueue(LocalCluster(build_tools(), args.cluster), args.manager)
    if args.command == "up":
        kueue.up()
    else:
        kueue.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
