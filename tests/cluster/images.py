"""The project's images, built from images/*/Dockerfile with buildah, without Docker, and
pushed to the local cluster's registry (registry.py), from which its real node pulls them
(`make images`).

Nothing can be pulled from outside here, so each Dockerfile's base (a build argument whose
default is the official image users build on) is replaced by a stand-in made on this
machine: Debian bookworm from its packages (mmdebstrap), Python 3.11 like the official
python:3.11-slim-bookworm, and for the trainer the same torch release from PyPI in a
virtual environment at /opt/conda, like pytorch/pytorch. pip inside the builds installs
from a wheelhouse downloaded here (through pip's cache) instead of the index. The
frameworks image (Lightning, Accelerate) is built on the trainer image just built.

Command line::

    python tests/cluster/images.py build           # build (or reuse) and push every image
    python tests/cluster/images.py pull --cluster NAME
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster import hostproc
from cluster.progress import say, size, ticking
from cluster.registry import Registry, app_version, local_name, push_chart
from cluster.tools import build_tools, cache_dir

if TYPE_CHECKING:
    from cluster.realnode import RealNode

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
STAND_INS = "localhost/multigpu-operator/stand-in"
# Packages of the stand-in Python base: what python:3.11-slim-bookworm offers that the
# Dockerfiles use (python, venv with pip, CA certificates).
DEBIAN_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")
PUSH_COMPRESSION = "zstd"  # containerd >= 1.5 pulls it


# The published names (the chart's and the examples'); the local cluster's pods use
# local_name() of them, the same image in the local registry.
OPERATOR_IMAGE = f"ghcr.io/multigpu-operator/operator:{app_version()}"
TRAINER_IMAGE = f"ghcr.io/multigpu-operator/trainer:{app_version()}"
FRAMEWORKS_IMAGE = f"ghcr.io/multigpu-operator/trainer-frameworks:{app_version()}"
# What `make images` pushes and a cluster's real node pulls when it starts.
PUSHED = (TRAINER_IMAGE, FRAMEWORKS_IMAGE, OPERATOR_IMAGE)


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
        with ticking("mmdebstrap: Debian bookworm with Python"):
            hostproc.run(
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


def frameworks_image(trainer: str) -> Built:
    """The trainer image plus Lightning and Accelerate. Their wheels are downloaded with
    the base's torch pinned, so that resolving them fetches no other torch."""
    torch = version("torch").split("+")[0]
    return _build(
        FRAMEWORKS_IMAGE,
        REPO,
        REPO / "images/frameworks/Dockerfile",
        {"TRAINER_IMAGE": trainer},
        ["-r", str(REPO / "images/frameworks/requirements.txt"), f"torch=={torch}"],
        ignorefile=REPO / "images/frameworks/Dockerfile.dockerignore",
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
    trainer = trainer_image(pytorch.name)
    frameworks = frameworks_image(trainer.name)
    built = [python, pytorch, trainer, frameworks, operator_image(python.name)]
    # Layers of earlier builds that no image uses any more (the layer cache of the current
    # ones stays): without this every code change leaves the operator's layers behind.
    buildah("rmi", "--prune", check=False)
    return built


def pause_image_archive() -> Path:
    """The pod sandbox image: the pause binary build-tools.sh compiled, as an archive."""
    from cluster.realnode_config import PAUSE_IMAGE

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


def push_built(registry: Registry) -> None:
    """Push the project's images that are built to the registry (`make images`)."""
    for name in PUSHED:
        if image_id(name) is None:
            say(f"{name}: not built (make images); not pushed")
            continue
        push(registry, name)


def push(registry: Registry, name: str) -> bool:
    """Push image `name` to the registry as local_name(name) unless that build is there
    already; True if it was pushed. Layers go as zstd at its fastest level: a push to a
    registry always compresses (buildah's --disable-compression does not apply), and for
    the trainer's 6 GB zstd took a third less CPU than the default gzip (65 s against 93 s)."""
    built = image_id(name)
    if built is None:
        raise RuntimeError(f"{name} is not built: run `make images`")
    ref = local_name(name)
    stamps = registry.root / "pushed.json"
    pushed = json.loads(stamps.read_text()) if stamps.exists() else {}
    stamp = {"image_id": built, "compression": PUSH_COMPRESSION}
    last = pushed.get(ref, {})
    if {k: last.get(k) for k in stamp} == stamp and registry.digest(ref) == last.get("digest"):
        say(f"{ref}: already in the registry")
        return False
    total, before = image_size(name), registry.stored_bytes()
    digest_file = images_dir() / "push.digest"
    with ticking(
        f"pushing {ref}",
        lambda: f"{size(registry.stored_bytes() - before)} written ({size(total)} uncompressed)",
    ):
        root = images_dir()
        # buildah's own lines (one a layer) go out as they come.
        proc = subprocess.run(
            [
                "buildah", "--root", str(root / "storage"), "--runroot", str(root / "run"),
                "push", "--compression-format", PUSH_COMPRESSION, "--compression-level", "1",
                "--tls-verify=false", "--digestfile", str(digest_file), name, f"docker://{ref}",
            ],
            check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"buildah push of {name} to {ref} failed")
    pushed[ref] = {**stamp, "digest": digest_file.read_text().strip()}
    stamps.write_text(json.dumps(pushed, indent=1))
    return True


def pull_built(node: RealNode, registry: Registry) -> None:
    """Have the node pull the project's images from the registry before pods need them, so
    that the first job starts at once; pods pull them again (policy Always), which for an
    unchanged image is a look at its digest."""
    for name in PUSHED:
        ref = local_name(name)
        if registry.digest(ref) is None:
            say(f"{ref}: not in the registry (make images); not pulled")
            continue
        node.pull(ref, registry.image_bytes(ref))
        # And by its published name, through the mirror (nothing more to fetch): a job
        # applied as written (make demo's, a user's) finds the image just built.
        node.pull(name, registry.image_bytes(ref))


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
    with ticking(f"building {name}"):
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
        hostproc.run(
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build (or reuse) the images and push them and the chart")
    pull_cmd = sub.add_parser("pull", help="have a cluster's real node pull the images")
    pull_cmd.add_argument("--cluster", required=True)
    args = parser.parse_args(argv)
    if args.command == "build":
        # The registry and helm compile while the images build (a cold machine).
        with ThreadPoolExecutor(1) as pool:
            tools = pool.submit(build_tools, "registry", "helm", only=True)
            for built in build_all():
                took = f"built in {built.seconds:.0f} s" if built.seconds else "already built"
                say(f"{built.name}: {built.size_bytes / 2**20:,.0f} MiB, {took}")
            registry = Registry(tools.result().registry_bin / "registry")
        started = registry.up()
        try:
            push_built(registry)
            say(f"chart {push_chart(tools.result().helm)} pushed to the registry")
        finally:
            if started:
                registry.release()
        return 0
    from cluster.localcluster import LocalCluster
    from cluster.realnode import RealNode

    tools_ = build_tools()
    registry = Registry(tools_.registry_bin / "registry")
    registry.up()
    pull_built(RealNode(LocalCluster(tools_, args.cluster)), registry)
    return 0


if __name__ == "__main__":
    sys.exit(main())
