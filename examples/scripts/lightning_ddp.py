"""Data-parallel training written the way the Lightning docs write it.

A LightningModule, a plain DataLoader and ``L.Trainer(accelerator, devices, num_nodes,
strategy="ddp")``: Lightning adds the DistributedSampler, wraps the model in DDP and
starts the process group itself. Nothing here knows about the operator. Lightning finds
its rank in the environment (docs/training.md#frameworks-lightning-accelerate):
- under torchrun (``launcher: Torchrun``) from torchrun's RANK, WORLD_SIZE, LOCAL_RANK
  and GROUP_RANK (its TorchElasticEnvironment);
- started once per pod (``launcher: Script``) from NODE_RANK, LOCAL_RANK, MASTER_ADDR
  and MASTER_PORT, the rank being NODE_RANK * devices + LOCAL_RANK (its
  LightningEnvironment).
Either way ``--num-nodes`` must be the job's pods and ``--devices`` its processes per pod:
examples/lightning-ddp.yaml passes the operator's NNODES and NPROC_PER_NODE.

It classifies scikit-learn's handwritten digits (shipped with the library: no download).
At the end every rank prints the world size and a checksum of its final weights, which
DDP keeps identical on every rank.

    python examples/scripts/lightning_ddp.py --epochs 5          # one process, any machine
"""

from __future__ import annotations

import argparse
import hashlib

import lightning as L
import torch
import torch.nn.functional as F
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


class DigitClassifier(L.LightningModule):
    def __init__(self, lr: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = torch.nn.Sequential(
            torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        accuracy = (self(x).argmax(dim=1) == y).float().mean()
        self.log("val_accuracy", accuracy, sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


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
    parser.add_argument("--accelerator", default="auto")
    parser.add_argument("--devices", type=int, default=1, help="processes per node (pod)")
    parser.add_argument("--num-nodes", type=int, default=1, help="nodes (pods)")
    parser.add_argument("--root-dir", default="/tmp/lightning-digits", help="logs, checkpoints")
    args = parser.parse_args()

    L.seed_everything(0)  # the same initial model everywhere (DDP also broadcasts rank 0's)
    model = DigitClassifier(lr=args.lr)
    train = DataLoader(digits(train=True), batch_size=args.batch_size, shuffle=True)
    val = DataLoader(digits(train=False), batch_size=256)
    trainer = L.Trainer(
        accelerator=args.accelerator,
        devices=args.devices,
        num_nodes=args.num_nodes,
        strategy="ddp",
        max_epochs=args.epochs,
        default_root_dir=args.root_dir,
        enable_progress_bar=False,
    )
    trainer.fit(model, train, val)
    accuracy = trainer.callback_metrics["val_accuracy"].item()
    print(
        f"[rank {trainer.global_rank}] done | world size {trainer.world_size}"
        f" | val accuracy {accuracy:.4f} | weights sha256 {weights_sha256(model)}"
    )


if __name__ == "__main__":
    main()
