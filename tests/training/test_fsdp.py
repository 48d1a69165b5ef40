"""Sharded data parallel (FSDP2) across 4 real processes (gloo on the CPU) trains what one
process trains on the concatenated batches: full sharding, hybrid (2 pods of 2),
gradient accumulation, and activation checkpointing per block."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from multigpu_train import blocks
from training import procs
from training.workers.batch import model
from training.workers.fsdp_step import global_batches, optimizer

RANKS = 4
STEPS = 3
MICRO_BATCH = 4
# name: (sharding, batches accumulated per step, activation checkpointing)
CASES = {
    "full": ("full", 1, False),
    # LOCAL_WORLD_SIZE=2: a (2 replicas, 2 shards) mesh, as 2 pods of 2 processes.
    "hybrid": ("hybrid", 1, False),
    "full-accumulate-2": ("full", 2, False),
    "full-activation-checkpointing": ("full", 1, True),
}
# fp32, 3 steps of SGD with momentum (workers/fsdp_step.py says why not Adam): the
# sharded run sums the gradients in another order (a reduce-scatter of 4 shares against
# one backward of the whole batch), so the weights differ by rounding only. Seen: at most
# 1.2e-7 apart (every case); the tolerance is 1e-5 absolute (and relative), orders of
# magnitude below a step's change (lr 0.05 x gradients of about 1e-2 and up).
WEIGHT_RTOL = WEIGHT_ATOL = 1e-5
LOSS_RTOL = LOSS_ATOL = 1e-5


@pytest.fixture(scope="module")
def sharded_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every case's weights and losses from one 4-rank job."""
    out = tmp_path_factory.mktemp("fsdp")
    cases = [f"{n}:{kind}:{a}:{int(ac)}" for n, (kind, a, ac) in CASES.items()]
    per_rank = [{"LOCAL_WORLD_SIZE": "2"}] * RANKS
    args = [str(out), str(STEPS), str(MICRO_BATCH), *cases]
    for done in procs.run_ranks("training.workers.fsdp_step", args, RANKS, per_rank=per_rank):
        done.check()
    return out


def reference(accum: int) -> tuple[list[float], dict[str, torch.Tensor]]:
    """One process, the whole global batch a step: losses and the weights after."""
    net = model("transformer")
    sgd = optimizer(net)
    losses = []
    for x, y in global_batches(STEPS, RANKS * accum * MICRO_BATCH):
        sgd.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        sgd.step()
        losses.append(float(loss.detach()))
    return losses, {n: p.detach() for n, p in net.state_dict().items()}


@pytest.mark.parametrize("case", CASES)
def test_sharded_training_follows_one_process(sharded_runs: Path, case: str) -> None:
    accum = CASES[case][1]
    expected_losses, expected = reference(accum)
    got = torch.load(sharded_runs / f"{case}-weights.pt", weights_only=True)
    assert got.keys() == expected.keys(), "the sharded model keeps the parameter names"
    for name, weight in expected.items():
        torch.testing.assert_close(got[name], weight, rtol=WEIGHT_RTOL, atol=WEIGHT_ATOL, msg=name)
    # Each rank's loss is that of its share: their mean is the whole batch's.
    per_rank = [
        torch.load(sharded_runs / f"{case}-losses-rank{r}.pt", weights_only=True)
        for r in range(RANKS)
    ]
    mean = torch.stack(per_rank).mean(dim=0)
    torch.testing.assert_close(mean, torch.tensor(expected_losses), rtol=LOSS_RTOL, atol=LOSS_ATOL)


def test_per_block_options_keep_the_parameter_names_and_the_gradients() -> None:
    x, y = global_batches(1, 8)[0]

    def gradients(net: nn.Module) -> dict[str, torch.Tensor]:
        nn.functional.cross_entropy(net(x), y).backward()  # type: ignore[no-untyped-call]
        return {n: p.grad for n, p in net.named_parameters() if p.grad is not None}

    plain = model("transformer")
    expected = gradients(plain)
    recomputed = model("transformer")
    found = blocks.apply(recomputed, activation_checkpointing=True)
    assert len(found) == 2, "the transformer's two encoder blocks"
    assert recomputed.state_dict().keys() == plain.state_dict().keys()
    got = gradients(recomputed)
    for name, grad in expected.items():
        torch.testing.assert_close(got[name], grad, rtol=0, atol=0, msg=name)
    # torch.compile through its eager backend here: inductor's C++ build would take
    # minutes of the 2 CPUs; what is checked is that the wrapping keeps names and math.
    compiled = model("transformer")
    blocks.apply(compiled, activation_checkpointing=True, compile=True, compile_backend="eager")
    assert compiled.state_dict().keys() == plain.state_dict().keys()
    got = gradients(compiled)
    for name, grad in expected.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-5, atol=1e-6, msg=name)


def test_blocks_of_the_cnn_are_its_layers_with_parameters() -> None:
    names = [type(b).__name__ for b in blocks.blocks_of(model("cnn"))]
    assert names == ["Conv2d", "Conv2d", "Linear", "Linear"]


def test_the_entrypoint_scores_uneven_test_shares_without_hanging() -> None:
    """16 test samples over 3 ranks in batches of 5: rank 0 has 2 batches, the others 1.
    A sharded forward gathers from every rank, so those run one more, uncounted."""
    flags = [
        "--dataset", "synthetic", "--synthetic-samples", "64", "--synthetic-shape", "1,8,8",
        "--model", "transformer", "--transformer-dim", "32", "--transformer-layers", "2",
        "--batch-size", "5", "--epochs", "1", "--steps-per-epoch", "2", "--sharding", "full",
    ]  # fmt: skip
    runs = procs.run_ranks("multigpu_train.ddp", flags, 3, timeout=120)
    accuracies = {done.check().floats(r"final test_accuracy=([\d.]+)")[0] for done in runs}
    assert len(accuracies) == 1, "every rank reports the accuracy over all 16 samples"
    assert "sharding full: device mesh {'shard': 3} cpu" in runs[0].output
