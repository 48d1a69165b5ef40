"""Data sources and models: shapes agree, folders load, nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from multigpu_train import data, imagefolder, models
from multigpu_train.config import TrainConfig
from multigpu_train.errors import SetupError
from multigpu_train.split import boundaries, split


def write_pgm(path: Path, pixels: np.ndarray, maxval: int = 255) -> None:
    height, width = pixels.shape[:2]
    magic = b"P6" if pixels.ndim == 3 else b"P5"
    dtype = ">u2" if maxval > 255 else "u1"
    header = magic + f"\n# made by a test\n{width} {height}\n{maxval}\n".encode()
    path.write_bytes(header + pixels.astype(dtype).tobytes())


def test_digits_ship_with_scikit_learn() -> None:
    digits = data.digits()
    assert (len(digits.train), len(digits.test)) == (1437, 360)  # type: ignore[arg-type]
    x, _ = digits.train[0]
    assert x.shape == (1, 8, 8)
    assert float(x.min()) >= 0
    assert float(x.max()) <= 1
    assert digits.sample_shape == (1, 8, 8)
    assert digits.classes == 10


def test_image_folder_with_explicit_split(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for split_name, count in (("train", 3), ("test", 1)):
        for label in ("cat", "dog"):
            folder = tmp_path / split_name / label
            folder.mkdir(parents=True)
            for i in range(count):
                write_pgm(folder / f"{i}.pgm", rng.integers(0, 65535, (4, 5)), maxval=65535)
            np.save(folder / "extra.npy", rng.random((1, 4, 5)).astype(np.float32))
    loaded = data.load(TrainConfig(dataset="folder", data_dir=tmp_path))
    assert (len(loaded.train), len(loaded.test)) == (8, 4)  # type: ignore[arg-type]
    assert loaded.sample_shape == (1, 4, 5)
    assert loaded.classes == 2
    labels = sorted(int(loaded.train[i][1]) for i in range(8))
    assert labels == [0, 0, 0, 0, 1, 1, 1, 1]


def test_image_folder_split_by_the_loader(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    colour = rng.integers(0, 255, (6, 6, 3))
    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        for i in range(10):
            write_pgm(tmp_path / label / f"{i}.ppm", colour)
    loaded = data.load(TrainConfig(dataset="folder", data_dir=tmp_path))
    assert (len(loaded.train), len(loaded.test)) == (16, 4)  # type: ignore[arg-type]
    x, _ = loaded.train[0]
    assert x.shape == (3, 6, 6)
    # Colour channels come out as CxHxW in [0, 1].
    torch.testing.assert_close(x, torch.from_numpy(colour.transpose(2, 0, 1) / 255).float())


# Pillow reads every format; the loader gives CxHxW float32 in [0, 1] whatever the mode.
IMAGE_CASES = [
    pytest.param(np.array([[0, 51], [255, 102]], np.uint8), 255, "png", id="png-grey"),
    pytest.param(np.array([[0, 13107], [65535, 26214]], np.uint16), 65535, "png", id="png-16bit"),
    pytest.param(np.arange(12, dtype=np.uint8).reshape(2, 2, 3) * 20, 255, "png", id="png-rgb"),
    pytest.param(np.full((2, 2, 4), 200, np.uint8), 255, "png", id="png-alpha-dropped"),
    pytest.param(np.array([[0, 255], [255, 0]], np.uint8), 255, "bmp", id="bmp-grey"),
]


@pytest.mark.parametrize(("pixels", "scale", "fmt"), IMAGE_CASES)
def test_image_files_load_as_chw_in_unit_range(
    tmp_path: Path, pixels: np.ndarray, scale: int, fmt: str
) -> None:
    path = tmp_path / f"image.{fmt}"
    Image.fromarray(pixels).save(path)  # the mode follows the dtype and shape
    loaded = imagefolder.read_image(path)
    expected = pixels[..., :3] if pixels.ndim == 3 else pixels[..., None]
    np.testing.assert_allclose(loaded, expected.transpose(2, 0, 1) / scale, rtol=1e-6)
    assert loaded.dtype == np.float32


def test_palette_images_become_rgb(tmp_path: Path) -> None:
    image = Image.new("P", (3, 2))
    image.putpalette([255, 0, 0, 0, 0, 255] + [0] * 762)
    image.putpixel((1, 1), 1)
    image.save(tmp_path / "p.gif")
    loaded = imagefolder.read_image(tmp_path / "p.gif")
    assert loaded.shape == (3, 2, 3)
    assert loaded[:, 0, 0].tolist() == [1.0, 0.0, 0.0]
    assert loaded[:, 1, 1].tolist() == [0.0, 0.0, 1.0]


def test_images_of_different_shapes_are_rejected(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    np.save(tmp_path / "a" / "1.npy", np.zeros((4, 4)))
    np.save(tmp_path / "a" / "2.npy", np.zeros((5, 4)))
    with pytest.raises(SetupError, match="differ in shape"):
        imagefolder.load_folder(tmp_path)


@pytest.mark.parametrize("shape", [(3, 32, 32), (1, 8, 8), (16, 24)])
@pytest.mark.parametrize("kind", ["cnn", "transformer"])
def test_every_model_fits_every_sample_shape(shape: tuple[int, ...], kind: str) -> None:
    if kind == "cnn" and len(shape) != 3:
        shape = (1, *shape)
    loaded = data.synthetic(64, shape, 5, seed=0)
    cfg = TrainConfig(model=kind, transformer_layers=2, transformer_dim=32, transformer_heads=4)
    model = models.build(cfg, loaded.sample_shape, loaded.classes)
    x, y = next(iter(torch.utils.data.DataLoader(loaded.train, batch_size=8)))
    assert model(x).shape == (8, 5)
    assert int(y.max()) < 5


@pytest.mark.parametrize(
    ("sizes", "stages", "expected"),
    [
        ([10, 10, 10, 10], 2, [0, 2]),
        # Parameter-free layers stay with the layer before them.
        ([100, 0, 0, 1, 1], 2, [0, 3]),
        ([100, 0, 0, 1, 1], 3, [0, 3, 4]),
        ([1, 1, 1], 3, [0, 1, 2]),
        ([0, 0, 50, 0, 50, 0], 2, [0, 4]),
        # The default CNN's layers, in 4 stages: once a stage of ReLU alone.
        ([320, 0, 18496, 0, 0, 0, 131200, 0, 1290], 4, [0, 2, 6, 8]),
    ],
)
def test_stage_boundaries(sizes: list[int], stages: int, expected: list[int]) -> None:
    assert boundaries(sizes, stages) == expected


def test_more_stages_than_layers_with_parameters_is_a_setup_error() -> None:
    with pytest.raises(SetupError, match="6 layers, 2 of them with parameters, into 3"):
        boundaries([0, 0, 50, 0, 50, 0], 3)


def test_stages_keep_the_whole_models_names() -> None:
    whole = models.small_cnn((1, 8, 8), 10)
    parts = split(whole, 3)
    names = [n for part in parts for n in part.state_dict()]
    assert names == list(whole.state_dict())
    with pytest.raises(SetupError, match="9 layers, 4 of them with parameters, into 10"):
        split(whole, 10)


# Every built-in model, as the trainer and gpu-check build them: (config, sample shape).
BUILT_IN_MODELS = {
    "cnn-digits": (TrainConfig(model="cnn"), (1, 8, 8)),
    "cnn-rgb": (TrainConfig(model="cnn"), (3, 32, 32)),
    "transformer-default": (TrainConfig(model="transformer"), (3, 32, 32)),
    "transformer-8-layers": (TrainConfig(model="transformer", transformer_layers=8), (3, 32, 32)),
}


@pytest.mark.parametrize("stages", range(2, 11))
@pytest.mark.parametrize("name", BUILT_IN_MODELS)
def test_every_stage_of_a_built_in_model_has_parameters(name: str, stages: int) -> None:
    """Each stage can have an optimizer; beyond that, a setup error naming the numbers."""
    cfg, shape = BUILT_IN_MODELS[name]
    whole = models.build(cfg, shape, 10)
    layers_with_params = sum(1 for layer in whole if any(True for _ in layer.parameters()))
    if stages > layers_with_params:
        with pytest.raises(SetupError, match=f"{layers_with_params} of them with parameters"):
            split(whole, stages)
        return
    parts = split(whole, stages)
    assert len(parts) == stages
    for part in parts:
        torch.optim.Adam(part.parameters())  # raises on an empty parameter list
    assert [n for part in parts for n in part.state_dict()] == list(whole.state_dict())
