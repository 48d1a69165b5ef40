"""Is this torch the build the image promises? Run by the Dockerfile, so a wrong base
image fails the build instead of a user's first GPU job.

    python -m multigpu_train.torch_build --torch 2.14 --cuda 13.0

It checks the torch release, that torch was built with CUDA (PyPI's Linux wheels and the
pytorch/pytorch images are; a CPU-only wheel is not, and would train on the CPU while
the job asks for GPUs), for the CUDA release of the image's tag, and with NCCL (the
backend of every multi-GPU mode). None of it needs a GPU: it reads how torch was built.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Build:
    torch: str
    cuda: str | None
    nccl: bool

    @classmethod
    def installed(cls) -> Build:
        return cls(torch.__version__, torch.version.cuda, dist.is_nccl_available())


def problems(build: Build, torch_release: str, cuda_release: str) -> list[str]:
    """What is wrong with ``build`` for an image of torch ``torch_release`` (2.14) on
    CUDA ``cuda_release`` (13.0); empty when nothing is."""
    found = []
    if not build.torch.startswith(f"{torch_release}."):
        found.append(f"torch {build.torch}, but the image is for torch {torch_release}")
    if build.cuda is None:
        found.append(f"torch {build.torch} is a CPU-only build: it cannot use a GPU")
    elif build.cuda.split(".")[:2] != cuda_release.split(".")[:2]:
        found.append(
            f"torch is built for CUDA {build.cuda}, but the image is for CUDA {cuda_release} "
            "(set the CUDA_VERSION build argument to match BASE_IMAGE)"
        )
    if not build.nccl:
        found.append(f"torch {build.torch} has no NCCL: multi-GPU training needs it")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", required=True, help="torch release, e.g. 2.14")
    parser.add_argument("--cuda", required=True, help="CUDA release, e.g. 13.0")
    args = parser.parse_args(argv)
    build = Build.installed()
    found = problems(build, args.torch, args.cuda)
    for problem in found:
        print(f"wrong torch build: {problem}", file=sys.stderr)
    if not found:
        nccl = torch.cuda.nccl.version()  # type: ignore[no-untyped-call]
        print(f"torch {build.torch}: CUDA {build.cuda}, NCCL {nccl}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
