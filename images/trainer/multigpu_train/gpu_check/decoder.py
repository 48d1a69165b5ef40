"""Model FLOPs utilisation of a GPT-style decoder of about 1B parameters, sequence 2048,
in bf16, with and without ``torch.compile`` per block (the trainer's own per-block
compile, blocks.py).

The decoder: token and learned position embeddings, pre-norm blocks (causal
self-attention through ``scaled_dot_product_attention``, a 4x GELU MLP), a final norm
and an output layer tied to the token embedding. Its FLOPs per token of training
(``flops_per_token``) are counted as torchtitan and PaLM count them: 6 x the parameters
of every matrix multiplication (forward 2, backward 4), plus 12 x layers x width x
sequence for attention's two matrix products, not halved for the causal mask. MFU is
those FLOPs times tokens per second over the card's dense 16-bit peak.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional

from multigpu_train import blocks
from multigpu_train.precision import Precision


@dataclass(frozen=True)
class DecoderSize:
    vocab: int
    dim: int
    layers: int
    heads: int
    seq: int
    batch: int
    steps: int = 10
    warmup: int = 3

    @property
    def label(self) -> str:
        billions = parameters(self) / 1e9
        return f"{billions:.2g}B" if billions >= 0.1 else f"{parameters(self) / 1e6:.2g}M"


# About 1.1 B parameters: 20 blocks of width 2048 and a 32,000-token vocabulary.
GPU_DECODER = DecoderSize(vocab=32000, dim=2048, layers=20, heads=16, seq=2048, batch=4)
CPU_DECODER = DecoderSize(vocab=256, dim=64, layers=2, heads=4, seq=64, batch=2, steps=3, warmup=1)


def matmul_parameters(size: DecoderSize) -> int:
    """Weights that multiply activations: per block q, k, v and the projection (4 d^2)
    and the MLP (8 d^2); the tied output layer (d x vocab)."""
    return size.layers * 12 * size.dim**2 + size.dim * size.vocab


def parameters(size: DecoderSize) -> int:
    """Every parameter: the matrices, the position embedding, biases and norms."""
    d = size.dim
    per_block = 12 * d * d + (3 * d + d + 4 * d + d) + 2 * 2 * d
    return size.layers * per_block + size.vocab * d + size.seq * d + 2 * d


def flops_per_token(size: DecoderSize) -> float:
    """Training FLOPs per token: 6 N (N: matmul parameters) + 12 L d T (attention)."""
    return 6.0 * matmul_parameters(size) + 12.0 * size.layers * size.dim * size.seq


def mfu(tokens_per_second: float, size: DecoderSize, peak_tflops: float) -> float:
    """The fraction of ``peak_tflops`` that ``tokens_per_second`` of training uses."""
    return tokens_per_second * flops_per_token(size) / (peak_tflops * 1e12)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(dim, dim=2)
        q, k, v = (
            t.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v)
        )
        attended = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, seq, dim))
        out: torch.Tensor = x + self.down(functional.gelu(self.up(self.norm2(x))))
        return out


class Decoder(nn.Module):
    def __init__(self, size: DecoderSize) -> None:
        super().__init__()
        self.tokens = nn.Embedding(size.vocab, size.dim)
        self.positions = nn.Parameter(torch.randn(size.seq, size.dim) * 0.02)
        self.layers = nn.ModuleList(Block(size.dim, size.heads) for _ in range(size.layers))
        self.norm = nn.LayerNorm(size.dim)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tokens(tokens) + self.positions[: tokens.shape[1]]
        for layer in self.layers:
            x = layer(x)
        # The output layer is the token embedding, transposed (tied weights).
        logits: torch.Tensor = self.norm(x) @ self.tokens.weight.t()
        return logits


def train_step(
    model: Decoder, optimizer: torch.optim.Optimizer, precision: Precision, tokens: torch.Tensor
) -> torch.Tensor:
    """Next-token prediction on ``tokens``: forward, backward, optimizer step."""
    with precision.autocast():
        logits = model(tokens[:, :-1])
    loss = functional.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten())
    loss.backward()  # type: ignore[no-untyped-call]
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def tokens_per_second(
    size: DecoderSize, device: torch.device, precision_name: str, compiled: bool
) -> float:
    """Training tokens per second after ``size.warmup`` untimed steps (the compile)."""
    torch.manual_seed(0)
    model = Decoder(size).to(device)
    if compiled:
        for layer in model.layers:
            blocks.compile_forward(layer)
    cuda = device.type == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    precision = Precision(precision_name, device.type)
    # seq + 1 tokens: the inputs and, one along, the targets.
    tokens = torch.randint(0, size.vocab, (size.batch, size.seq + 1), device=device)

    def wait() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    for _ in range(size.warmup):
        train_step(model, optimizer, precision, tokens)
    wait()
    started = time.perf_counter()
    for _ in range(size.steps):
        loss = train_step(model, optimizer, precision, tokens)
    float(loss)  # waits for the last step
    wait()
    return size.steps * size.batch * size.seq / (time.perf_counter() - started)
