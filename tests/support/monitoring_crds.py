"""The Prometheus Operator's CRDs (ServiceMonitor, PodMonitor, PrometheusRule), so the
chart's monitoring objects are validated by the real API server against the real schemas.

They are not copied into this repository: the Go module of the Prometheus Operator ships
them (example/prometheus-operator-crd/), and `go mod download` fetches that module from
the module proxy, the same source as every other test tool, verified against the Go
checksum database and against the hash pinned here.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

MODULE = "github.com/prometheus-operator/prometheus-operator"
VERSION = "v0.85.0"
# go.sum hash of the module zip: a different download fails loudly.
SUM = "h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s="
KINDS = ("servicemonitors", "podmonitors", "prometheusrules")


def monitoring_crd_files() -> list[Path]:
    # Outside any module, so no go.mod of ours is read or changed.
    with tempfile.TemporaryDirectory() as empty:
        proc = subprocess.run(
            ["go", "mod", "download", "-json", f"{MODULE}@{VERSION}"],
            cwd=empty,
            capture_output=True,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        raise RuntimeError(
            f"go mod download {MODULE}@{VERSION} failed:\n{proc.stdout}{proc.stderr}"
        )
    info = json.loads(proc.stdout)
    if info["Sum"] != SUM:
        raise RuntimeError(f"{MODULE}@{VERSION} has hash {info['Sum']}, expected {SUM}")
    folder = Path(info["Dir"]) / "example/prometheus-operator-crd"
    return [folder / f"monitoring.coreos.com_{kind}.yaml" for kind in KINDS]
