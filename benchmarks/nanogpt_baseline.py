"""A plain PyTorch GPT and training loop equivalent to nanoGPT's, as a speed baseline.

Written for the benchmark (not imported by the library): the same architecture nanoGPT
trains on Shakespeare characters — learned positions, pre-norm LayerNorm, fused q/k/v
projection, ``scaled_dot_product_attention(is_causal=True)``, GELU MLP, tied embeddings,
normal(0, 0.02) init with scaled residual projections — and the same loop: random
windows, AdamW with weight decay on matrices only, warmup + cosine learning rate,
gradient clipping at 1.0.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d, bias=False)
        self.c_attn = nn.Linear(d, 3 * d, bias=False)
        self.attn_proj = nn.Linear(d, d, bias=False)
        self.ln_2 = nn.LayerNorm(d, bias=False)
        self.c_fc = nn.Linear(d, 4 * d, bias=False)
        self.mlp_proj = nn.Linear(4 * d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class PlainGPT(nn.Module):
    def __init__(self, vocab: int, context: int, d: int, layers: int, heads: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, bias=False)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def train_plain(
    data: np.ndarray,
    vocab: int,
    steps: int,
    *,
    context: int = 64,
    batch: int = 12,
    d: int = 128,
    layers: int = 4,
    heads: int = 4,
    lr: float = 1e-3,
    warmup: int = 100,
    seed: int = 1337,
    return_model: bool = False,
) -> list[float] | PlainGPT:
    """nanoGPT's loop on ``data`` (token ids); returns the training losses (or the model)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = PlainGPT(vocab, context, d, layers, heads)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.99),
    )
    losses = []
    for step in range(steps):
        ratio = (
            (step + 1) / warmup
            if step < warmup
            else 0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))
        )
        for group in optimizer.param_groups:
            group["lr"] = lr * ratio
        starts = rng.integers(0, len(data) - context - 1, batch)
        x = torch.from_numpy(np.stack([data[i : i + context] for i in starts]).astype(np.int64))
        y = torch.from_numpy(np.stack([data[i + 1 : i + 1 + context] for i in starts]).astype(np.int64))
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return model.eval() if return_model else losses
