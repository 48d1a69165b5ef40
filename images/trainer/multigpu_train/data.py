"""Training data: the digits bundled with scikit-learn, a user's image folder, or noise.

Every source yields float CxHxW samples and integer labels, so every model fits every
source. Nothing is downloaded.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils.data import Dataset, TensorDataset

from multigpu_train import imagefolder
from multigpu_train.config import TrainConfig

TEST_FRACTION = 0.2
# The split never depends on --seed: changing the seed must not leak test samples.
SPLIT_SEED = 0


@dataclass(frozen=True)
class Data:
    train: Dataset[tuple[torch.Tensor, ...]]
    test: Dataset[tuple[torch.Tensor, ...]]
    sample_shape: tuple[int, ...]
    classes: int


def _split(images: torch.Tensor, labels: torch.Tensor, classes: int) -> Data:
    from sklearn.model_selection import train_test_split

    stratify = labels.numpy() if int(labels.bincount().min()) >= 2 else None
    train_idx, test_idx = train_test_split(
        torch.arange(len(labels)).numpy(),
        test_size=TEST_FRACTION,
        random_state=SPLIT_SEED,
        stratify=stratify,
    )
    train_t, test_t = torch.from_numpy(train_idx), torch.from_numpy(test_idx)
    return Data(
        train=TensorDataset(images[train_t], labels[train_t]),
        test=TensorDataset(images[test_t], labels[test_t]),
        sample_shape=tuple(images.shape[1:]),
        classes=classes,
    )


def digits() -> Data:
    """1,797 real 8x8 handwritten digits, 10 classes, scaled to [0, 1]."""
    # Imported here: scikit-learn takes seconds to import, and only digits need it.
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = torch.tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(bunch.target, dtype=torch.long)
    return _split(images, labels, 10)


def synthetic(samples: int, shape: tuple[int, ...], classes: int, seed: int) -> Data:
    """Random samples whose label is a fixed random linear function of them.

    Learnable, so the loss falls, but meant for measuring throughput.
    """
    gen = torch.Generator().manual_seed(seed)
    total = samples + max(samples // 4, 1)
    images = torch.randn((total, *shape), generator=gen)
    projection = torch.randn((int(torch.tensor(shape).prod()), classes), generator=gen)
    labels = (images.flatten(1) @ projection).argmax(dim=1)
    return Data(
        train=TensorDataset(images[:samples], labels[:samples]),
        test=TensorDataset(images[samples:], labels[samples:]),
        sample_shape=shape,
        classes=classes,
    )


def folder(cfg: TrainConfig) -> Data:
    assert cfg.data_dir is not None
    classes, splits = imagefolder.load_folder(cfg.data_dir)
    if "all" in splits:
        images, labels = splits["all"]
        return _split(images, labels, len(classes))
    (train_x, train_y), (test_x, test_y) = splits["train"], splits["test"]
    return Data(
        train=TensorDataset(train_x, train_y),
        test=TensorDataset(test_x, test_y),
        sample_shape=tuple(train_x.shape[1:]),
        classes=len(classes),
    )


def load(cfg: TrainConfig) -> Data:
    if cfg.dataset == "folder":
        return folder(cfg)
    if cfg.dataset == "synthetic":
        return synthetic(cfg.synthetic_samples, cfg.synthetic_shape, cfg.classes, cfg.seed)
    return digits()
