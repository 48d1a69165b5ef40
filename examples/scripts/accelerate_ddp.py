"""Data-parallel training written the way the Hugging Face Accelerate docs write it.

A plain PyTorch loop with ``Accelerator()``, ``accelerator.prepare(model, optimizer,
dataloader)`` and ``accelerator.backward(loss)``: Accelerate starts the process group,
wraps the model in DDP and shards the data itself. Nothing here knows about the
operator: Accelerate reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT,
which the operator sets for ``launcher: Script`` and torchrun for ``launcher: Torchrun``
(docs/training.md#frameworks-lightning-accelerate). On a machine without a GPU
Accelerate trains across processes only when told to use the CPU:
``ACCELERATE_USE_CPU=true``, what ``accelerate launch --cpu`` sets and what
examples/accelerate-ddp.yaml sets for its CPU pods; without it each process trains alone.

It classifies scikit-learn's handwritten digits (shipped with the library: no download).
At the end every rank prints the world size and a checksum of its final weights, which
DDP keeps identical on every rank.

    python examples/scripts/accelerate_ddp.py --epochs 5          # one process, any machine
"""

from __future__ import annotations

import argparse
import hashlib

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset


def digits(train: bool) -> TensorDataset:
    """8x8 digit images as 64 features in [0, 1]; the same 80/20 split on every rank."""
    images, labels = load_digits(return_X_y=True)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    cut = int(0.8 * len(labels))
    chosen = order[:cut] if train else order[cut:]
    x = torch.tensor(images, dtype=torch.float32)[chosen] / 16.0
    return TensorDataset(x, torch.tensor(labels)[chosen])


def weights_sha256(model: torch.nn.Module) -> str:
    """A checksum of every parameter and buffer, in state_dict order."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    accelerator = Accelerator()
    set_seed(0)  # the same initial model everywhere (DDP also broadcasts rank 0's)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    train = DataLoader(digits(train=True), batch_size=args.batch_size, shuffle=True)
    val = DataLoader(digits(train=False), batch_size=256)
    model, optimizer, train, val = accelerator.prepare(model, optimizer, train, val)

    for epoch in range(args.epochs):
        model.train()
        total, steps = 0.0, 0
        for x, y in train:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            total, steps = total + loss.item(), steps + 1
        accelerator.print(f"epoch {epoch} | steps {steps} | loss {total / steps:.4f}")

    model.eval()
    correct, seen = 0, 0
    with torch.no_grad():
        for x, y in val:
            predictions, labels = accelerator.gather_for_metrics((model(x).argmax(dim=1), y))
            correct += int((predictions == labels).sum())
            seen += len(labels)
    accelerator.wait_for_everyone()
    weights = weights_sha256(accelerator.unwrap_model(model))
    print(
        f"[rank {accelerator.process_index}] done | world size {accelerator.num_processes}"
        f" | val accuracy {correct / seen:.4f} | weights sha256 {weights}"
    )
    accelerator.end_training()


if __name__ == "__main__":
    main()
