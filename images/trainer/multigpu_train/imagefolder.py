"""A small ImageFolder-style loader without torchvision.

Layout: ``<root>/<class>/<image>``, class names sorted into label numbers, or
``<root>/train/<class>/...`` and ``<root>/test/<class>/...`` for an explicit split.
Images are ``.npy`` arrays (HxW or CxHxW, used as is) or image files Pillow reads (PNG,
JPEG, Netpbm, ...), scaled to [0, 1]. Everything is read into memory once: this is for
small data on a volume; bigger data wants its own Dataset.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from multigpu_train.errors import SetupError

NUMPY_SUFFIXES = (".npy",)
# Formats Pillow reads; Netpbm (.pgm/.ppm) binary or ASCII.
PILLOW_SUFFIXES = (
    ".png",
    ".jpg",
    ".jpeg",
    ".bmp",
    ".gif",
    ".tif",
    ".tiff",
    ".webp",
    ".pgm",
    ".ppm",
)
SUFFIXES = NUMPY_SUFFIXES + PILLOW_SUFFIXES


def check_readable_dir(path: Path) -> None:
    if not path.exists():
        raise SetupError(f"data path {path} does not exist (is the volume mounted?)")
    if not path.is_dir():
        raise SetupError(f"data path {path} is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise SetupError(f"data path {path} is not readable by uid {os.getuid()}")


# Greyscale modes stay one channel; everything else (palette, alpha, CMYK) becomes RGB.
GREY_MODES = ("1", "L", "LA", "F")


def _pillow(path: Path) -> np.ndarray[Any, Any]:
    # Imported here: only folder data needs it, and every trainer process imports this module.
    from PIL import Image

    with Image.open(path) as image:
        if image.mode.startswith("I"):
            # 16-bit greyscale (PNG, PGM with maxval > 255): Pillow scales it to 0..65535.
            array = np.asarray(image, dtype=np.float32) / 65535.0
        else:
            wanted = "L" if image.mode in GREY_MODES else "RGB"
            array = np.asarray(image.convert(wanted), dtype=np.float32) / 255.0
    return array[None] if array.ndim == 2 else array.transpose(2, 0, 1)


def read_image(path: Path) -> np.ndarray[Any, Any]:
    """One image as a float32 CxHxW array."""
    suffix = path.suffix.lower()
    try:
        if suffix in NUMPY_SUFFIXES:
            array: np.ndarray[Any, Any] = np.load(path, allow_pickle=False).astype(np.float32)
            return array[None] if array.ndim == 2 else array
        return _pillow(path)
    except (OSError, ValueError) as err:  # PIL.UnidentifiedImageError is an OSError
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
