"""The project's images, built from images/*/Dockerfile with buildah, without Docker or a
registry, and loaded into a real node's containerd (`make images`).

Nothing can be pulled here, so each Dockerfile's base (a build argument whose default is
the official image users build on) is replaced by a stand-in made on this machine:
Debian bookworm from its packages (mmdebstrap), Python 3.11 like the official
python:3.11-slim-bookworm, and for the trainer the same torch release from PyPI in a
virtual environment at /opt/conda, like pytorch/pytorch. pip inside the builds installs
from a wheelhouse downloaded here (through pip's cache) instead of the index.

Command line::

    python tests/cluster/images.py build           # build (or reuse) every image
    python tests/cluster/images.py load --cluster NAME
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster.tools import cache_dir

if TYPE_CHECKING:
    from cluster.realnode import RealNode

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
STAND_INS = "localhost/multigpu-operator/stand-in"
IMAGE_ID_LABEL = "multigpu.dev/image-id"
# Packages of the stand-in Python base: what python:3.11-slim-bookworm offers that the
# Dockerfiles use (python, venv with pip, CA certificates).
DEBIAN_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")


def _chart_app_version() -> str:
    chart = yaml.safe_load((REPO / "charts/multigpu-operator/Chart.yaml").read_text())
    return str(chart["appVersion"])


def _trainer_version() -> str:
    meta = tomllib.loads((REPO / "images/trainer/pyproject.toml").read_text())
    return str(meta["project"]["version"])


OPERATOR_IMAGE = f"ghcr.io/multigpu-operator/operator:{_chart_app_version()}"
TRAINER_IMAGE = f"ghcr.io/multigpu-operator/trainer:{_trainer_version()}"


@dataclass(frozen=True)
class Built:
    name: str
    image_id: str
    size_bytes: int
    seconds: float  # 0 when it was already built


def images_dir() -> Path:
    return cache_dir() / "images"


def buildah(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """buildah with its storage under our cache, not the machine's podman storage."""
    root = images_dir()
    argv = ["buildah", "--root", str(root / "storage"), "--runroot", str(root / "run"), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def image_id(name: str) -> str | None:
    proc = buildah("inspect", "--type", "image", "--format", "{{.FromImageID}}", name, check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def image_size(name: str) -> int:
    """Bytes of the image's layers, uncompressed (what a node stores)."""
    out = buildah("inspect", "--type", "image", name).stdout
    manifest = json.loads(json.loads(out)["Manifest"])
    return sum(int(layer["size"]) for layer in manifest["layers"])


# Stand-in bases -------------------------------------------------------------------------


def stand_in_python() -> Built:
    """Debian bookworm's Python 3.11, in place of python:3.11-slim-bookworm."""
    name = f"{STAND_INS}/python:3.11-slim-bookworm"
    if image_id(name):
        return Built(name, image_id(name) or "", image_size(name), 0)
    start = time.monotonic()
    rootfs = images_dir() / f"bookworm-{_digest(' '.join(DEBIAN_PACKAGES))}.tar"
    if not rootfs.exists():
        partial = rootfs.with_suffix(".partial.tar")  # mmdebstrap picks the format by suffix
        _run(
            "mmdebstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}",
            "bookworm", str(partial),
        )  # fmt: skip
        partial.rename(rootfs)
    container = buildah("from", "scratch").stdout.strip()
    try:
        buildah("add", container, str(rootfs), "/")
        buildah("config", "--env", "LANG=C.UTF-8", "--cmd", '["python3"]', container)
        buildah("commit", "--quiet", container, name)
    finally:
        buildah("rm", container, check=False)
    return Built(name, image_id(name) or "", image_size(name), time.monotonic() - start)


def stand_in_pytorch(base: str) -> Built:
    """PyPI's torch (the CUDA build) in /opt/conda, in place of pytorch/pytorch."""
    torch = version("torch").split("+")[0]
    name = f"{STAND_INS}/pytorch:{torch}-cuda13.0-cudnn9-runtime"
    return _build(
        name,
        HERE / "stand-ins",
        HERE / "stand-ins/pytorch.Containerfile",
        {"BASE_IMAGE": base, "TORCH_VERSION": torch},
        [f"torch=={torch}"],
    )


# The project's images -------------------------------------------------------------------


def trainer_image(base: str) -> Built:
    return _build(
        TRAINER_IMAGE,
        REPO / "images/trainer",
        REPO / "images/trainer/Dockerfile",
        {"BASE_IMAGE": base},
        ["-r", str(REPO / "images/trainer/requirements.txt"), "setuptools==80.9.0"],
    )


def operator_image(base: str) -> Built:
    return _build(
        OPERATOR_IMAGE,
        REPO,
        REPO / "images/operator/Dockerfile",
        {"PYTHON_IMAGE": base},
        ["-r", str(REPO / "images/operator/requirements.txt"), "setuptools==80.9.0"],
        ignorefile=REPO / "images/operator/Dockerfile.dockerignore",
    )


def build_all() -> list[Built]:
    python = stand_in_python()
    pytorch = stand_in_pytorch(python.name)
    built = [python, pytorch, trainer_image(pytorch.name), operator_image(python.name)]
    # Layers of earlier builds that no image uses any more (the layer cache of the current
    # ones stays): without this every code change leaves the operator's layers behind.
    buildah("rmi", "--prune", check=False)
    return built


def pause_image_archive() -> Path:
    """The pod sandbox image: the pause binary build-tools.sh compiled, as an archive."""
    from cluster.realnode_config import PAUSE_IMAGE
    from cluster.tools import build_tools

    archive = images_dir() / f"pause-{PAUSE_IMAGE.rsplit(':', 1)[1]}.tar"
    if archive.exists():
        return archive
    images_dir().mkdir(parents=True, exist_ok=True)
    container = buildah("from", "scratch").stdout.strip()
    try:
        buildah("copy", container, str(build_tools().pause_bin / "pause"), "/pause")
        buildah("config", "--entrypoint", '["/pause"]', "--user", "65535:65535", container)
        buildah("commit", "--quiet", container, PAUSE_IMAGE)
    finally:
        buildah("rm", container, check=False)
    partial = archive.with_suffix(".partial")
    buildah("push", "--quiet", PAUSE_IMAGE, f"docker-archive:{partial}:{PAUSE_IMAGE}")
    partial.rename(archive)
    return archive


def load_built(node: RealNode) -> None:
    """Load the project's images that are built into the node (`make images` builds them)."""
    for name in (TRAINER_IMAGE, OPERATOR_IMAGE):
        if image_id(name) is None:
            print(f"{name}: not built (make images); not loaded", file=sys.stderr)
            continue
        start = time.monotonic()
        if load(node, name):
            print(f"{name}: loaded in {time.monotonic() - start:.0f} s", file=sys.stderr)


def load(node: RealNode, name: str) -> bool:
    """Put image `name` into the node's containerd unless the same build is there already;
    True if it was loaded. The archive streams from buildah into containerd (no copy on
    disk: the trainer is several GB)."""
    built = image_id(name)
    if built is None:
        raise RuntimeError(f"{name} is not built: run `make images`")
    if node.image_labels().get(name, {}).get(IMAGE_ID_LABEL) == built:
        return False
    root = images_dir()
    push = subprocess.Popen(
        [
            "buildah", "--root", str(root / "storage"), "--runroot", str(root / "run"),
            "push", "--quiet", "--disable-compression", name, f"docker-archive:/dev/stdout:{name}",
        ],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert push.stdout is not None
    try:
        node.ctr("images", "import", "-", stdin_file=push.stdout)
    finally:
        push.stdout.close()
        if push.wait() != 0:
            raise RuntimeError(f"buildah push of {name} failed")
    node.ctr("images", "label", name, f"{IMAGE_ID_LABEL}={built}")
    return True


# Helpers ----------------------------------------------------------------------------------


def _build(
    name: str,
    context: Path,
    dockerfile: Path,
    build_args: dict[str, str],
    wheels: list[str],
    ignorefile: Path | None = None,
) -> Built:
    before = image_id(name)
    start = time.monotonic()
    wheelhouse = _wheelhouse(wheels)
    pip_conf = images_dir() / "pip.conf"
    # Builds install from the wheelhouse only: no index is reachable from inside them.
    pip_conf.write_text("[global]\nno-index = true\nfind-links = /wheelhouse\n")
    args = [
        "build", "--isolation", "chroot", "--layers", "--quiet",
        "--volume", f"{wheelhouse}:/wheelhouse:ro",
        "--volume", f"{pip_conf}:/etc/pip.conf:ro",
        "-f", str(dockerfile), "-t", name,
    ]  # fmt: skip
    for key, value in build_args.items():
        args += ["--build-arg", f"{key}={value}"]
    if ignorefile is not None:
        args += ["--ignorefile", str(ignorefile)]
    buildah(*args, str(context))
    after = image_id(name) or ""
    seconds = 0.0 if after == before else time.monotonic() - start
    return Built(name, after, image_size(name), seconds)


def _wheelhouse(requirements: list[str]) -> Path:
    """Wheels for `requirements`, downloaded for this machine's Python (3.11, like the
    images'); pip's cache makes a second download a copy."""
    house = images_dir() / "wheelhouse"
    stamp = house / f".{_digest(' '.join(_requirement_text(requirements)))}"
    if not stamp.exists():
        house.mkdir(parents=True, exist_ok=True)
        _run(
            sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
            "--dest", str(house), *requirements,
        )  # fmt: skip
        stamp.touch()
    return house


def _requirement_text(requirements: list[str]) -> list[str]:
    """Requirements with each -r file replaced by its content (for the stamp)."""
    out, it = [], iter(requirements)
    for item in it:
        out.append(Path(next(it)).read_text() if item == "-r" else item)
    return out


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build (or reuse) the stand-in bases and the project's images")
    load_cmd = sub.add_parser("load", help="load the trainer and operator images into a real node")
    load_cmd.add_argument("--cluster", required=True)
    args = parser.parse_args(argv)
    if args.command == "build":
        for built in build_all():
            took = f"built in {built.seconds:.0f} s" if built.seconds else "already built"
            print(f"{built.name}: {built.size_bytes / 2**20:,.0f} MiB, {took}", file=sys.stderr)
        return 0
    from cluster.localcluster import LocalCluster
    from cluster.realnode import RealNode
    from cluster.tools import build_tools

    load_built(RealNode(LocalCluster(build_tools(), args.cluster)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
