"""Activation checkpointing: the bytes autograd keeps, measured beside `glassformer count`'s
estimate, and the time it costs per training step, side by side.

Without checkpointing a step keeps every block's activations for backward
(`glassformer.inspect.costs.activation_bytes`). With it (``train.checkpoint_activations``) each
block keeps only its input, b t d, and recomputes the rest in backward, so the estimate becomes

    estimate - n_layers x (one block's activations) + n_layers x b t d

and backward holds one block's activations at a time on top of that. The measured figure is
the distinct storages autograd saves (`torch.autograd.graph.saved_tensors_hooks`, weights left
out: tests/test_count.py's method). The time is a forward + backward step, plain and
checkpointed in alternating rounds (median), on the CPU named in the first line.

    python -m benchmarks.activation_checkpointing [--rounds 7]
"""

from __future__ import annotations

import argparse
import dataclasses

import torch
import torch.nn.functional as F

from benchmarks.common import cpu_name, interleaved_medians
from glassformer.config import ModelConfig
from glassformer.inspect.costs import activation_bytes, bytes_per_number, saved_activation_bytes
from glassformer.models import build
from glassformer.train.scale import set_activation_checkpointing

SIZES = {  # name: (config, batch, seq_len)
    "shakespeare-char (4 x 128)": (ModelConfig(vocab_size=65, d_model=128, n_layers=4, n_heads=4), 12, 64),
    "GPT-2 124M shape, 6 layers": (
        ModelConfig(vocab_size=50257, d_model=768, n_layers=6, n_heads=12),
        2,
        256,
    ),
    "Llama-style 8 x 256": (
        ModelConfig(
            vocab_size=1000,
            d_model=256,
            n_layers=8,
            n_heads=8,
            n_kv_heads=2,
            norm="rmsnorm",
            positions="rope",
            activation="swiglu",
        ),
        4,
        256,
    ),
}


def saved_bytes(net, ids: torch.Tensor) -> int:
    """`saved_activation_bytes` of the forward pass and its loss."""
    return saved_activation_bytes(net, lambda: F.cross_entropy(net(ids).flatten(0, 1), ids.flatten()))


def checkpointed_estimate(config: ModelConfig, seq_len: int, batch: int) -> tuple[int, int]:
    """(bytes kept with checkpointing, one block's activations): the count's estimate with each
    block's activations replaced by its input b t d."""
    full = activation_bytes(config, seq_len, batch)
    one_block = full - activation_bytes(
        dataclasses.replace(config, n_layers=config.n_layers - 1), seq_len, batch
    )
    block_input = batch * seq_len * config.d_model * bytes_per_number("float32")
    return full - config.n_layers * (one_block - block_input), one_block


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"{cpu_name()}, torch {torch.__version__}, {torch.get_num_threads()} threads; float32")
    for name, (config, batch, seq_len) in SIZES.items():
        torch.manual_seed(0)
        net = build(config).train()
        ids = torch.randint(0, config.vocab_size, (batch, seq_len))
        estimate = activation_bytes(config, seq_len, batch)
        plain = saved_bytes(net, ids)
        set_activation_checkpointing(net, True)
        checkpointed = saved_bytes(net, ids)
        estimate_ckpt, one_block = checkpointed_estimate(config, seq_len, batch)

        def step(on: bool, net=net, ids=ids):
            set_activation_checkpointing(net, on)
            net.zero_grad(set_to_none=True)
            F.cross_entropy(net(ids).flatten(0, 1), ids.flatten()).backward()

        times = interleaved_medians({"plain": lambda: step(False), "ckpt": lambda: step(True)}, args.rounds)
        print(f"\n{name}: batch {batch} x {seq_len} tokens")
        print(
            f"  kept for backward, plain:        {plain / 2**20:8.2f} MiB measured, "
            f"{estimate / 2**20:8.2f} MiB estimated (x{plain / estimate:.3f})"
        )
        print(
            f"  kept for backward, checkpointed: {checkpointed / 2**20:8.2f} MiB measured, "
            f"{estimate_ckpt / 2**20:8.2f} MiB estimated (x{checkpointed / estimate_ckpt:.3f}); "
            f"+{one_block / 2**20:.2f} MiB for one block while backward recomputes it"
        )
        print(
            f"  saving: {1 - checkpointed / plain:.1%} of the activations; step time "
            f"{times['plain'] * 1000:.1f} ms plain vs {times['ckpt'] * 1000:.1f} ms checkpointed "
            f"(x{times['ckpt'] / times['plain']:.2f})"
        )


if __name__ == "__main__":
    main()
