"""The operator's image (images/operator/Dockerfile), which the chart deploys: hadolint, a
pinned non-root base, and an exactly pinned dependency list that matches pyproject.toml
(the trainer image's list is checked the same way). `make images` builds it (on a
stand-in base: tests/cluster/images.py) and the real-pod tests run it."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from support.chart import CHART

REPO = Path(__file__).resolve().parents[3]
IMAGE = REPO / "images/operator"
DOCKERFILE = IMAGE / "Dockerfile"
HADOLINT = Path(sys.executable).parent / "hadolint"


def pinned(image: Path) -> dict[str, str]:
    """An image's requirements.txt as {name: exact version}."""
    pins: dict[str, str] = {}
    for line in (image / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def runtime_closure(requirement: str, extras: set[str], found: set[str]) -> None:
    """Add the names of `requirement` and of everything it needs (installed metadata) to
    `found`; `extras` are those its parent asked for, which its markers may name."""
    req = Requirement(requirement)
    if req.marker and not any(req.marker.evaluate({"extra": e}) for e in extras or {""}):
        return
    name = canonicalize_name(req.name)
    if name in found:
        return
    found.add(name)
    for sub in distribution(req.name).requires or []:
        runtime_closure(sub, req.extras, found)


def test_hadolint_is_clean() -> None:
    result = subprocess.run(
        [str(HADOLINT), "--no-color", str(DOCKERFILE)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def base_images(dockerfile: Path) -> list[str]:
    """The FROM images with each ${ARG} replaced by its default: what users build on."""
    text = dockerfile.read_text()
    defaults = dict(re.findall(r"^ARG (\w+)=(\S+)", text, flags=re.M))
    return [
        re.sub(r"\$\{(\w+)\}", lambda arg: defaults[arg.group(1)], base)
        for base in re.findall(r"^FROM (\S+)", text, flags=re.M)
    ]


def test_base_image_is_pinned_by_tag_and_matches_the_python_we_test_with() -> None:
    bases = base_images(DOCKERFILE)
    assert len(bases) == 2
    for base in bases:
        match = re.fullmatch(r"python:(\d+)\.(\d+)\.(\d+)-slim-\w+", base)
        assert match, f"{base} is not pinned to a patch release"
        assert (int(match.group(1)), int(match.group(2))) == sys.version_info[:2]


def test_runs_as_a_numeric_non_root_user_the_chart_expects() -> None:
    users = re.findall(r"^USER (\S+)", DOCKERFILE.read_text(), flags=re.M)
    assert users == ["65532:65532"]
    values = (CHART / "values.yaml").read_text()
    assert "runAsUser: 65532" in values
    assert 'CMD ["python", "-m", "multigpu_operator"]' in DOCKERFILE.read_text()


# (image directory, its package's pyproject, what its base image already provides)
PINNED_IMAGES = [
    pytest.param(IMAGE, REPO / "pyproject.toml", set(), id="operator"),
    # The trainer's base image is the PyTorch one: torch and its dependencies come with it.
    pytest.param(
        REPO / "images/trainer", REPO / "images/trainer/pyproject.toml", {"torch"}, id="trainer"
    ),
]


@pytest.mark.parametrize(("image", "pyproject", "from_base"), PINNED_IMAGES)
def test_requirements_pin_every_runtime_dependency_within_pyproject_ranges(
    image: Path, pyproject: Path, from_base: set[str]
) -> None:
    dependencies = [
        requirement
        for requirement in tomllib.loads(pyproject.read_text())["project"]["dependencies"]
        if canonicalize_name(Requirement(requirement).name) not in from_base
    ]
    pins = pinned(image)
    for requirement in map(Requirement, dependencies):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not pinned in {image}/requirements.txt"
        assert requirement.specifier.contains(pins[name]), (name, pins[name])
    closure: set[str] = set()
    for requirement in dependencies:
        runtime_closure(requirement, set(), closure)
    assert set(pins) == closure, {
        "missing": sorted(closure - set(pins)),
        "not needed": sorted(set(pins) - closure),
    }


def test_build_context_holds_only_what_the_image_installs() -> None:
    ignore = (IMAGE / "Dockerfile.dockerignore").read_text().splitlines()
    allowed = {line[1:] for line in ignore if line.startswith("!")}
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE.read_text(), flags=re.M)
    sources = {src.rstrip("/") for line in copied for src in line.split()}
    assert sources <= {entry.rstrip("/") for entry in allowed}
