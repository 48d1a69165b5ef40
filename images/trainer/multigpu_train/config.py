"""Command-line flags of the entrypoints; each defaults to an environment variable.

A job spec sets the variables (the operator's contract, docs/env-contract.md, plus the
MGJ_* training variables of docs/training.md); a flag on the command line wins.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from multigpu_train.errors import SetupError

DATASETS = ("digits", "folder", "synthetic")
MODELS = ("cnn", "transformer")
DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("auto", "gloo", "nccl")
SCHEDULES = ("GPipe", "1F1B")
PRECISIONS = ("fp32", "bf16", "fp16")
SHARDINGS = ("none", "full", "hybrid")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 10
    batch_size: int = 32
    lr: float = 2e-3
    seed: int = 0
    dataset: str = "digits"
    data_dir: Path | None = None
    model: str = "cnn"
    transformer_layers: int = 4
    transformer_dim: int = 128
    transformer_heads: int = 4
    synthetic_samples: int = 4096
    synthetic_shape: tuple[int, ...] = (3, 32, 32)
    classes: int = 10
    steps_per_epoch: int = 0
    data_workers: int = 0
    checkpoint_dir: Path | None = None
    checkpoint_every_steps: int = 0
    checkpoint_timeout: float = 1800.0
    metrics_port: int = 0
    init_timeout: float = 600.0
    precision: str = "fp32"
    # fp32 matmuls and convolutions in TF32 on GPUs that have it (Ampere and newer).
    tf32: bool = True
    # The host waits for the GPUs, reads the losses and times the steps every N steps.
    sync_every_steps: int = 10
    device: str = "auto"
    backend: str = "auto"
    # DistributedDataParallel knobs.
    bucket_cap_mb: float = 25.0
    gradient_as_bucket_view: bool = True
    grad_accum_steps: int = 1
    find_unused_parameters: bool = False
    # Sharded data parallel (FSDP2) instead of DDP, and per-block options (blocks.py).
    sharding: str = "none"
    activation_checkpointing: bool = False
    compile: bool = False
    # Pipeline (ModelParallel) knobs; 0 stages = decided by the entrypoint.
    stages: int = 0
    micro_batches: int = 4
    schedule: str = "GPipe"


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _shape(text: str) -> tuple[int, ...]:
    dims = tuple(int(part) for part in text.replace("x", ",").split(",") if part.strip())
    if not dims or any(d <= 0 for d in dims):
        raise ValueError(f"not a shape like 3,32,32: {text!r}")
    return dims


def _path(text: str) -> Path | None:
    return Path(text) if text else None


@dataclass(frozen=True)
class Option:
    flag: str
    env: str
    parse: Callable[[str], Any]
    help: str
    choices: Sequence[str] | None = None

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


COMMON = (
    Option("--epochs", "MGJ_EPOCHS", int, "epochs to train (a resumed job counts finished ones)"),
    Option("--batch-size", "MGJ_BATCH_SIZE", int, "samples per step per process"),
    Option("--lr", "MGJ_LR", float, "Adam learning rate"),
    Option("--seed", "MGJ_SEED", int, "seed for weights, shuffling and synthetic data"),
    Option("--dataset", "MGJ_DATASET", str, "default: folder if a data dir is set", DATASETS),
    Option("--data-dir", "MGJ_DATA_DIR", _path, "ImageFolder-style directory (docs/training.md)"),
    Option("--model", "MGJ_MODEL", str, "small CNN or transformer block stack", MODELS),
    Option("--transformer-layers", "MGJ_TRANSFORMER_LAYERS", int, "transformer blocks"),
    Option("--transformer-dim", "MGJ_TRANSFORMER_DIM", int, "transformer width"),
    Option("--transformer-heads", "MGJ_TRANSFORMER_HEADS", int, "attention heads"),
    Option("--synthetic-samples", "MGJ_SYNTHETIC_SAMPLES", int, "synthetic training samples"),
    Option("--synthetic-shape", "MGJ_SYNTHETIC_SHAPE", _shape, "synthetic sample shape C,H,W"),
    Option("--classes", "MGJ_CLASSES", int, "classes of synthetic data"),
    Option("--steps-per-epoch", "MGJ_STEPS_PER_EPOCH", int, "cap on batches per epoch, 0 = all"),
    Option("--data-workers", "MGJ_DATA_WORKERS", int, "DataLoader worker processes"),
    Option("--checkpoint-dir", "MGJ_CHECKPOINT_DIR", _path, "where rank 0 keeps checkpoint.pt"),
    Option(
        "--checkpoint-every-steps",
        "MGJ_CHECKPOINT_EVERY_STEPS",
        int,
        "also checkpoint every N optimizer steps within an epoch, 0 = at epoch ends only",
    ),
    Option(
        "--checkpoint-timeout",
        "MGJ_CHECKPOINT_TIMEOUT_SECONDS",
        float,
        "how long the other ranks wait while rank 0 reads or writes a checkpoint",
    ),
    Option(
        "--metrics-port", "MGJ_TRAINER_METRICS_PORT", int, "Prometheus port (+LOCAL_RANK), 0=off"
    ),
    Option(
        "--init-timeout",
        "MGJ_INIT_TIMEOUT_SECONDS",
        float,
        "rendezvous and collective timeout (checkpoints have their own)",
    ),
    Option(
        "--precision",
        "MGJ_PRECISION",
        str,
        "fp32, bf16 autocast, or fp16 autocast with a gradient scaler",
        PRECISIONS,
    ),
    Option(
        "--tf32",
        "MGJ_TF32",
        _bool,
        "fp32 matmuls and convolutions in TF32 on Ampere and newer GPUs (default on)",
    ),
    Option(
        "--sync-every-steps",
        "MGJ_SYNC_EVERY_STEPS",
        int,
        "wait for the GPUs, read the loss and time the steps every N steps (default 10)",
    ),
    Option("--device", "MGJ_DEVICE", str, "auto: CUDA when visible", DEVICES),
    Option("--backend", "MGJ_BACKEND", str, "process group backend", BACKENDS),
)
DDP = (
    Option("--bucket-cap-mb", "MGJ_DDP_BUCKET_CAP_MB", float, "DDP gradient bucket size (MiB)"),
    Option(
        "--gradient-as-bucket-view",
        "MGJ_DDP_GRADIENT_AS_BUCKET_VIEW",
        _bool,
        "gradients alias the all-reduce buckets (saves a copy)",
    ),
    Option("--grad-accum-steps", "MGJ_GRAD_ACCUM_STEPS", int, "batches per optimizer step"),
    Option(
        "--find-unused-parameters",
        "MGJ_DDP_FIND_UNUSED_PARAMETERS",
        _bool,
        "walk the graph each step for unused parameters",
    ),
    Option(
        "--sharding",
        "MGJ_SHARDING",
        str,
        "none: DDP; full: FSDP2 across all ranks; hybrid: FSDP2 within a pod, replicas across",
        SHARDINGS,
    ),
    Option(
        "--activation-checkpointing",
        "MGJ_ACTIVATION_CHECKPOINTING",
        _bool,
        "recompute each block's activations in the backward (default off)",
    ),
    Option("--compile", "MGJ_COMPILE", _bool, "torch.compile each block (default off)"),
)
PIPELINE = (
    Option("--stages", "MGJ_PIPELINE_STAGES", int, "pipeline stages (0 = decided at start)"),
    Option("--micro-batches", "MGJ_MICRO_BATCHES", int, "micro-batches per batch"),
    Option("--schedule", "MGJ_PIPELINE_SCHEDULE", str, "multi-rank schedule", SCHEDULES),
)
GROUPS = {"common": COMMON, "ddp": DDP, "pipeline": PIPELINE}


def _env_default(option: Option, environ: Mapping[str, str]) -> Any:
    raw = environ.get(option.env)
    if raw is None or raw == "":
        return None
    if option.env == "MGJ_BACKEND" and raw not in BACKENDS:
        raise SetupError(f"{option.env}={raw!r}: expected one of {', '.join(BACKENDS)}")
    try:
        value = option.parse(raw)
    except ValueError as err:
        raise SetupError(f"{option.env}={raw!r}: {err}") from None
    if option.choices is not None and value not in option.choices:
        raise SetupError(f"{option.env}={raw!r}: expected one of {', '.join(option.choices)}")
    return value


def parse(
    argv: Sequence[str] | None,
    environ: Mapping[str, str],
    groups: Sequence[str] = ("common",),
    prog: str | None = None,
) -> TrainConfig:
    """Flags, then environment variables, then TrainConfig's defaults."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    defaults = TrainConfig()
    for group in groups:
        for option in GROUPS[group]:
            env_value = _env_default(option, environ)
            default = env_value if env_value is not None else getattr(defaults, option.dest)
            parser.add_argument(
                option.flag,
                type=option.parse,
                default=default,
                choices=option.choices,
                help=f"{option.help} [env {option.env}; default {default}]",
            )
    args = vars(parser.parse_args(argv))
    if "dataset" in args and args["data_dir"] is not None and not _dataset_given(argv, environ):
        args["dataset"] = "folder"
    cfg = TrainConfig(**args)
    _check(cfg)
    return cfg


def _dataset_given(argv: Sequence[str] | None, environ: Mapping[str, str]) -> bool:
    flags = argv or []
    return bool(environ.get("MGJ_DATASET")) or any(a.startswith("--dataset") for a in flags)


def _check(cfg: TrainConfig) -> None:
    positive = {
        "--epochs": cfg.epochs,
        "--batch-size": cfg.batch_size,
        "--grad-accum-steps": cfg.grad_accum_steps,
        "--micro-batches": cfg.micro_batches,
        "--sync-every-steps": cfg.sync_every_steps,
        "--classes": cfg.classes,
    }
    for flag, number in positive.items():
        if number < 1:
            raise SetupError(f"{flag} must be at least 1, got {number}")
    if cfg.dataset == "folder" and cfg.data_dir is None:
        raise SetupError("--dataset folder needs --data-dir (or MGJ_DATA_DIR)")
    for flag, seconds in (
        ("--init-timeout", cfg.init_timeout),
        ("--checkpoint-timeout", cfg.checkpoint_timeout),
    ):
        if seconds <= 0:
            raise SetupError(f"{flag} must be positive, got {seconds}")
    if cfg.checkpoint_every_steps < 0:
        raise SetupError(
            f"--checkpoint-every-steps must be 0 (epoch ends only) or more, "
            f"got {cfg.checkpoint_every_steps}"
        )
