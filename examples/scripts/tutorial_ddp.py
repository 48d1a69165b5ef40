"""Data-parallel training written the way the PyTorch DDP tutorials write it.

Nothing here knows about the operator: the script reads the standard variables
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK) through
``init_process_group(init_method="env://")``, shards the data with DistributedSampler
and lets rank 0 save the checkpoint. A MultiGPUJob with ``launcher: Script`` and one
process per pod sets exactly those variables (docs/env-contract.md), so the script runs
unchanged in a cluster and with ``mgj run examples/tutorial-script.yaml --local``.

It classifies scikit-learn's handwritten digits (shipped with the library: no download)
with a small network and reports the test accuracy at the end.

    python examples/scripts/tutorial_ddp.py --epochs 5 --checkpoint checkpoint.pt
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def digits(train: bool) -> TensorDataset:
    """8x8 digit images as 64 features in [0, 1]; the same 80/20 split on every rank."""
    images, labels = load_digits(return_X_y=True)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    cut = int(0.8 * len(labels))
    chosen = order[:cut] if train else order[cut:]
    x = torch.tensor(images, dtype=torch.float32)[chosen] / 16.0
    return TensorDataset(x, torch.tensor(labels)[chosen])


def ddp_setup() -> torch.device:
    # NCCL on GPUs, gloo on CPU (a pod with gpusPerReplica: 0, or `mgj run --local --cpu`).
    if torch.cuda.is_available():
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group(backend="nccl", init_method="env://")
        return torch.device("cuda", local_rank)
    dist.init_process_group(backend="gloo", init_method="env://")
    return torch.device("cpu")


class Trainer:
    def __init__(
        self,
        model: torch.nn.Module,
        data: DataLoader[tuple[torch.Tensor, ...]],
        optimizer: torch.optim.Optimizer,
        device: torch.device,
        checkpoint: str,
    ) -> None:
        self.rank = dist.get_rank()
        self.device = device
        self.data = data
        self.optimizer = optimizer
        self.checkpoint = checkpoint
        device_ids = [device.index] if device.type == "cuda" else None
        self.model = DDP(model.to(device), device_ids=device_ids)

    def _run_epoch(self, epoch: int) -> float:
        sampler = self.data.sampler
        assert isinstance(sampler, DistributedSampler)
        # A different shuffle every epoch, the same on every rank.
        sampler.set_epoch(epoch)
        total, steps = 0.0, 0
        for source, targets in self.data:
            source, targets = source.to(self.device), targets.to(self.device)
            self.optimizer.zero_grad()
            loss = F.cross_entropy(self.model(source), targets)
            loss.backward()
            self.optimizer.step()
            total, steps = total + loss.item(), steps + 1
        print(f"[rank {self.rank}] epoch {epoch} | steps {steps} | loss {total / steps:.4f}")
        return total / steps

    def _save_checkpoint(self, epoch: int) -> None:
        # Written to a temporary name and renamed: a crash never leaves half a file.
        state = {"epoch": epoch + 1, "model": self.model.module.state_dict()}
        torch.save(state, self.checkpoint + ".tmp")
        os.replace(self.checkpoint + ".tmp", self.checkpoint)
        print(f"[rank {self.rank}] epoch {epoch} | checkpoint saved at {self.checkpoint}")

    def test_accuracy(self, test: TensorDataset) -> float:
        self.model.eval()
        with torch.no_grad():
            x, y = (t.to(self.device) for t in test.tensors)
            return (self.model(x).argmax(dim=1) == y).float().mean().item()

    def train(self, epochs: int, save_every: int) -> None:
        for epoch in range(epochs):
            self._run_epoch(epoch)
            if self.rank == 0 and (epoch % save_every == 0 or epoch == epochs - 1):
                self._save_checkpoint(epoch)
        weight_norm = sum(p.detach().norm().item() for p in self.model.parameters())
        # DDP keeps every replica identical, so every rank prints the same number.
        world = dist.get_world_size()
        print(f"[rank {self.rank}] done | world size {world} | weight norm {weight_norm:.6f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--save-every", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--checkpoint", default="checkpoint.pt")
    args = parser.parse_args()

    device = ddp_setup()
    train = digits(train=True)
    data = DataLoader(
        train, batch_size=args.batch_size, shuffle=False, sampler=DistributedSampler(train)
    )
    torch.manual_seed(0)  # the same initial model everywhere (DDP also broadcasts rank 0's)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    trainer = Trainer(model, data, optimizer, device, args.checkpoint)
    trainer.train(args.epochs, args.save_every)
    print(f"[rank {trainer.rank}] test accuracy {trainer.test_accuracy(digits(train=False)):.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
