"""The node's NVIDIA driver against the CUDA release torch was built for.

A driver too old for torch's CUDA looks, from inside torch, exactly like a machine
without a GPU: ``torch.cuda.device_count()`` is 0. The driver's own version tells them
apart, and says which trainer image variant (docs/training.md, "The image") fits it.
The version is read from the kernel module (``/proc/driver/nvidia/version``, visible
in containers too), else from ``nvidia-smi``; neither needs torch's CUDA to work.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import torch

PROC_VERSION = Path("/proc/driver/nvidia/version")
# The oldest driver each CUDA major release runs on (its minor-version compatibility).
MIN_DRIVER = {13: 580, 12: 525, 11: 450}
# The trainer image variant for drivers from each minimum on (newest first).
VARIANTS = (
    (580, "the default image (CUDA 13.0)"),
    (
        525,
        "the CUDA 12 variant (docker build --build-arg CUDA_VERSION=12.6, tag "
        "trainer:0.1.0-cuda12)",
    ),
)


def parse_proc_version(text: str) -> str | None:
    """``NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  ...`` -> 580.65.06."""
    found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return found.group(1) if found else None


def installed_version() -> str | None:
    """The loaded driver's version, or None where no NVIDIA driver is seen."""
    try:
        return parse_proc_version(PROC_VERSION.read_text())
    except OSError:
        pass
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return None
    command = [binary, "--query-gpu=driver_version", "--format=csv,noheader"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None


def too_old(driver: str | None, cuda_build: str | None) -> str | None:
    """Why ``driver`` cannot run torch built for CUDA ``cuda_build``; None when it can,
    or when either is unknown (no driver at all is "no GPU", not "too old")."""
    if driver is None or cuda_build is None:
        return None
    try:
        major = int(driver.split(".")[0])
        cuda_major = int(cuda_build.split(".")[0])
    except ValueError:
        return None
    needed = MIN_DRIVER.get(cuda_major)
    if needed is None or major >= needed:
        return None
    fits = next((text for minimum, text in VARIANTS if major >= minimum), None)
    advice = (
        f"use {fits}, or upgrade the node's driver"
        if fits
        else "no trainer image runs on it: upgrade the node's driver to 525 or later"
    )
    return (
        f"the NVIDIA driver {driver} is too old for torch {torch.__version__} built with "
        f"CUDA {cuda_build}, which needs driver >= {needed}: {advice}"
    )


def diagnose() -> str | None:
    """This machine's driver against this torch: the reason it sees no GPU, if that is it."""
    return too_old(installed_version(), torch.version.cuda)
