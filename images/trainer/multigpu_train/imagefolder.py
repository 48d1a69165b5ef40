"""A small ImageFolder-style loader without torchvision.

Layout: ``<root>/<class>/<image>``, class names sorted into label numbers, or
``<root>/train/<class>/...`` and ``<root>/test/<class>/...`` for an explicit split.
Images are ``.npy`` arrays (HxW or CxHxW) or binary Netpbm (``.pgm`` grey, ``.ppm``
colour); ``.png``/``.jpg`` also load when Pillow is installed. Everything is read into
memory once: this is for small data on a volume; bigger data wants its own Dataset.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from multigpu_train.errors import SetupError

NUMPY_SUFFIXES = (".npy",)
NETPBM_SUFFIXES = (".pgm", ".ppm")
PILLOW_SUFFIXES = (".png", ".jpg", ".jpeg")
SUFFIXES = NUMPY_SUFFIXES + NETPBM_SUFFIXES + PILLOW_SUFFIXES


def check_readable_dir(path: Path) -> None:
    if not path.exists():
        raise SetupError(f"data path {path} does not exist (is the volume mounted?)")
    if not path.is_dir():
        raise SetupError(f"data path {path} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise SetupError(f"data path {path} is not readable by uid {os.getuid()}")


def _netpbm(path: Path) -> np.ndarray[Any, Any]:
    data = path.read_bytes()
    fields: list[bytes] = []
    pos = 0
    # Header: magic, width, height, maxval, separated by whitespace and # comments.
    while len(fields) < 4:
        while pos < len(data) and data[pos : pos + 1].isspace():
            pos += 1
        if data[pos : pos + 1] == b"#":
            pos = data.index(b"\n", pos)
            continue
        start = pos
        while pos < len(data) and not data[pos : pos + 1].isspace():
            pos += 1
        fields.append(data[start:pos])
    magic, width, height, maxval = fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    channels = {b"P5": 1, b"P6": 3}.get(magic)
    if channels is None:
        raise ValueError(f"only binary Netpbm (P5/P6) is supported, not {magic!r}")
    dtype = np.dtype(">u2") if maxval > 255 else np.dtype("u1")
    count = width * height * channels
    pixels = np.frombuffer(data, dtype=dtype, count=count, offset=pos + 1)
    image = pixels.reshape(height, width, channels).astype(np.float32) / maxval
    return image.transpose(2, 0, 1)


def _pillow(path: Path) -> np.ndarray[Any, Any]:
    try:
        image_module: Any = importlib.import_module("PIL.Image")
    except ImportError:
        raise SetupError(f"{path}: reading {path.suffix} files needs Pillow installed") from None
    with image_module.open(path) as image:
        array = np.asarray(image, dtype=np.float32) / 255.0
    return array[None] if array.ndim == 2 else array.transpose(2, 0, 1)


def read_image(path: Path) -> np.ndarray[Any, Any]:
    """One image as a float32 CxHxW array."""
    suffix = path.suffix.lower()
    try:
        if suffix in NUMPY_SUFFIXES:
            array: np.ndarray[Any, Any] = np.load(path, allow_pickle=False).astype(np.float32)
            return array[None] if array.ndim == 2 else array
        if suffix in NETPBM_SUFFIXES:
            return _netpbm(path)
        return _pillow(path)
    except SetupError:
        raise
    except (OSError, ValueError, IndexError) as err:
        raise SetupError(f"cannot read image {path}: {err}") from None


def _class_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def load_split(root: Path, classes: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Images and labels of one split; labels follow the order of ``classes``."""
    images: list[np.ndarray[Any, Any]] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        class_dir = root / name
        if not class_dir.is_dir():
            continue
        check_readable_dir(class_dir)
        for path in sorted(class_dir.iterdir()):
            if path.suffix.lower() in SUFFIXES:
                images.append(read_image(path))
                labels.append(label)
    if not images:
        raise SetupError(
            f"no images under {root}: expected {root}/<class>/<image> with one of "
            f"{', '.join(SUFFIXES)}"
        )
    shapes = {image.shape for image in images}
    if len(shapes) > 1:
        raise SetupError(f"images under {root} differ in shape {sorted(shapes)}: resize them")
    return torch.from_numpy(np.stack(images)), torch.tensor(labels, dtype=torch.long)


def load_folder(root: Path) -> tuple[list[str], dict[str, tuple[torch.Tensor, torch.Tensor]]]:
    """Class names and the splits found: {"train": ..., "test": ...} or {"all": ...}."""
    check_readable_dir(root)
    if (root / "train").is_dir() and (root / "test").is_dir():
        classes = _class_dirs(root / "train")
        splits = {name: load_split(root / name, classes) for name in ("train", "test")}
        return classes, splits
    classes = _class_dirs(root)
    if not classes:
        raise SetupError(f"no class directories under {root}: expected {root}/<class>/<image>")
    return classes, {"all": load_split(root, classes)}
