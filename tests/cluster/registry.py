"""The local cluster's OCI registry: the CNCF Distribution registry (built by build-tools.sh
from tests/cluster/go/registry), serving the project's images and its Helm chart over plain
HTTP at localhost:5001, the way a private registry serves a real cluster.

One registry per cache directory, shared by `make images` and every local cluster of that
cache: an image is pushed once and each cluster's real node pulls it (through a forwarder
on the machine's end of the node's veth, realnode.py). Its storage is under the cache
($MGJ_CACHE_DIR/registry), not a cluster's state, so `down` keeps it and a second
`make demo` pushes nothing. `make images` and `localcluster.py up` start it; it stops with
the last cluster of the cache (or after `make images` if no cluster runs).

Versions: charts/multigpu-operator/Chart.yaml is the one place. Its `appVersion` tags both
images (operator and trainer) and is the Python packages' version; its `version` is the
chart's (tests/unit/suite/test_versions.py checks every copy).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cluster import hostproc
from cluster.progress import bytes_under
from cluster.realnode_config import REGISTRY_HOST as HOST
from cluster.realnode_config import REGISTRY_PORT as PORT
from cluster.tools import cache_dir

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts/multigpu-operator"
CHARTS = f"oci://{HOST}/charts"
PUBLISHED = "ghcr.io/"  # the images' names in the chart and the examples
ENV_MARKER = "MGJ_REGISTRY"
MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ]
)


def chart_meta() -> dict[str, Any]:
    meta: dict[str, Any] = yaml.safe_load((CHART / "Chart.yaml").read_text())
    return meta


def app_version() -> str:
    """The images' tag and the packages' version (Chart.yaml's appVersion)."""
    return str(chart_meta()["appVersion"])


def local_name(image: str) -> str:
    """The name the local cluster's pods use for a published image:
    ghcr.io/multigpu-operator/trainer:0.1.0 -> localhost:5001/multigpu-operator/trainer:0.1.0."""
    return HOST + "/" + image.removeprefix(PUBLISHED) if image.startswith(PUBLISHED) else image


def chart_ref() -> str:
    return f"{CHARTS}/{chart_meta()['name']}"


@dataclass(frozen=True)
class Registry:
    binary: Path  # Tools.registry_bin / "registry"

    @property
    def root(self) -> Path:
        return cache_dir() / "registry"

    @property
    def storage(self) -> Path:
        return self.root / "storage"

    def processes(self) -> list[int]:
        return hostproc.marked_processes(ENV_MARKER, str(self.root))

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/v2/", timeout=3) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def up(self) -> bool:
        """Start the registry unless it runs; True if this call started it."""
        if self.processes() and self.answers():
            return False
        if self.answers():
            raise RuntimeError(
                f"port {PORT} answers, but not from this cache's registry ({self.root}): "
                "another cache directory's registry (MGJ_CACHE_DIR) or another program has it"
            )
        hostproc.stop(self.processes())
        self.storage.mkdir(parents=True, exist_ok=True)
        config = self.root / "config.yml"
        config.write_text(yaml.safe_dump(self._config(), sort_keys=False))
        env = {**os.environ, ENV_MARKER: str(self.root)}
        # Traces off: by default its OpenTelemetry exporter posts to a collector on localhost.
        env.update(OTEL_TRACES_EXPORTER="none", OTEL_SDK_DISABLED="true")
        hostproc.start_daemon("registry", [str(self.binary), "serve", str(config)], self.root, env)
        deadline = time.monotonic() + 20
        while not self.answers():
            if time.monotonic() > deadline or not self.processes():
                log = self.root / "registry.log"
                raise RuntimeError(f"the registry did not answer on {PORT}: see {log}")
            time.sleep(0.2)
        return True

    def release(self) -> None:
        """Stop the registry unless a local cluster of this cache still runs (a pull needs it)."""
        clusters = f"{cache_dir() / 'kwok' / 'clusters'}/"
        if any("kube-apiserver" in c for c in hostproc.cmdlines_containing(clusters)):
            return
        hostproc.stop(self.processes())

    def _config(self) -> dict[str, Any]:
        return {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.storage)},
                "delete": {"enabled": True},
                "maintenance": {"uploadpurging": {"enabled": False}},
            },
            "http": {"addr": f"127.0.0.1:{PORT}"},
        }

    # Reading it -------------------------------------------------------------------------

    def digest(self, ref: str) -> str | None:
        """The digest `ref` (HOST/repo:tag) has in the registry, or None if it has none."""
        try:
            with urllib.request.urlopen(self._manifest_request(ref, "HEAD"), timeout=10) as resp:
                digest = resp.headers.get("Docker-Content-Digest")
                return str(digest) if digest else None
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise

    def image_bytes(self, ref: str) -> int:
        """What pulling `ref` downloads: its layers and config, as stored."""
        with urllib.request.urlopen(self._manifest_request(ref, "GET"), timeout=10) as resp:
            manifest = json.loads(resp.read())
        parts = [manifest.get("config", {}), *manifest.get("layers", [])]
        return sum(int(part.get("size", 0)) for part in parts)

    def stored_bytes(self) -> int:
        """Bytes on disk under the storage (a push's progress is its growth)."""
        return bytes_under(self.storage)

    def _manifest_request(self, ref: str, method: str) -> urllib.request.Request:
        name, tag = ref.removeprefix(HOST + "/").rsplit(":", 1)
        return urllib.request.Request(
            f"http://127.0.0.1:{PORT}/v2/{name}/manifests/{tag}",
            method=method,
            headers={"Accept": MANIFEST_TYPES},
        )


def push_chart(helm: Path, version: str | None = None) -> str:
    """`helm package` the repository's chart (as `version`, Chart.yaml's by default) and
    `helm push` it to the registry; the version pushed. A version already there is replaced:
    the chart under test is always the working tree's."""
    version = version or str(chart_meta()["version"])
    with tempfile.TemporaryDirectory() as out:
        hostproc.run(
            str(helm), "package", str(CHART), "--version", version,
            "--app-version", app_version(), "--destination", out,
        )  # fmt: skip
        (package,) = Path(out).glob("*.tgz")
        hostproc.run(str(helm), "push", str(package), CHARTS, "--plain-http")
    return version
