"""The image's build-time check of its torch: the release, a CUDA build of the image's
CUDA, and NCCL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from multigpu_train import torch_build
from multigpu_train.torch_build import Build, problems

DOCKERFILE = Path(__file__).resolve().parents[2] / "images/trainer/Dockerfile"


def default_cuda() -> str:
    match = re.search(r"^ARG CUDA_VERSION=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert match, "the Dockerfile names its CUDA release in ARG CUDA_VERSION"
    return match.group(1)


def test_the_torch_of_the_venv_and_the_stand_in_base_passes() -> None:
    # tests/cluster/stand-ins/pytorch.Containerfile installs this same PyPI wheel.
    assert torch_build.main(["--torch", "2.14", "--cuda", default_cuda()]) == 0


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            Build("2.13.0+cu130", "13.0", True),
            "torch 2.13.0+cu130, but the image is for torch 2.14",
        ),
        (Build("2.14.1+cpu", None, False), "is a CPU-only build"),
        (
            Build("2.14.1+cu126", "12.6", True),
            "built for CUDA 12.6, but the image is for CUDA 13.0",
        ),
        (Build("2.14.1+cu130", "13.0", False), "has no NCCL"),
    ],
)
def test_a_wrong_build_is_named(build: Build, message: str) -> None:
    (found,) = [p for p in problems(build, "2.14", "13.0") if message in p]
    assert found
    assert problems(Build("2.14.1+cu130", "13.0", True), "2.14", "13.0") == []
    assert problems(Build("2.14.1+cu126", "12.6", True), "2.14", "12.6") == []


def test_a_wrong_build_fails_with_a_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        Build, "installed", classmethod(lambda cls: Build("2.14.1+cpu", None, False))
    )
    assert torch_build.main(["--torch", "2.14", "--cuda", "13.0"]) == 1
    assert "wrong torch build: torch 2.14.1+cpu is a CPU-only build" in capsys.readouterr().err
