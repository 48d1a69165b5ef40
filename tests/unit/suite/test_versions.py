"""One version, in one place: charts/multigpu-operator/Chart.yaml's `appVersion` tags the
operator and trainer images (tests/cluster/images.py reads it) and is the Python packages'
version; every other copy of it must agree, so bumping a release is one edit that this test
then walks through. The chart's own `version` is SemVer (an OCI registry and `helm install
--version` need it)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from multigpu_operator import __version__

REPO = Path(__file__).resolve().parents[3]
CHART = yaml.safe_load((REPO / "charts/multigpu-operator/Chart.yaml").read_text())
APP_VERSION = str(CHART["appVersion"])
IMAGE_TAG = re.compile(
    r"ghcr\.io/multigpu-operator/(?:trainer|trainer-frameworks|operator):([0-9][^\s\"'-]*)\b"
)
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?$")


def package_version(pyproject: Path) -> str:
    return str(tomllib.loads(pyproject.read_text())["project"]["version"])


def test_the_chart_version_is_semver() -> None:
    assert SEMVER.match(str(CHART["version"])), CHART["version"]


@pytest.mark.parametrize(
    "copy",
    [
        pytest.param(package_version(REPO / "pyproject.toml"), id="pyproject.toml"),
        pytest.param(package_version(REPO / "images/trainer/pyproject.toml"), id="trainer"),
        pytest.param(__version__, id="multigpu_operator.__version__"),
    ],
)
def test_the_packages_have_the_charts_app_version(copy: str) -> None:
    assert copy == APP_VERSION


def test_every_image_reference_has_the_charts_app_version() -> None:
    """The published image names in examples, manifests and the README."""
    files = [
        *sorted((REPO / "examples").rglob("*.yaml")),
        *sorted((REPO / "manifests").rglob("*.yaml")),
        REPO / "README.md",
    ]
    tags = {
        f"{path.relative_to(REPO)}: {tag}"
        for path in files
        for tag in IMAGE_TAG.findall(path.read_text())
    }
    assert tags, "no image reference found"
    assert {entry for entry in tags if not entry.endswith(f": {APP_VERSION}")} == set()
