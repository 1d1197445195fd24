"""Forward-pass time: our fused path vs our explicit path vs HF transformers, same run.

The same GPT-2-shaped model (HF ``GPT2LMHeadModel`` with random weights, converted with
``gf.from_hf``) runs the same batch through four forwards, interleaved so that machine
noise hits all alike; we print medians and ratios. Goal: ours / HF <= 1.0.

It also measures what unused hook points cost: an empty HookPoint call, times the
number of points in one forward, against the forward's time.

    python -m benchmarks.forward [--layers 12 --d-model 768 --batch 1 --seq 256]
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

import glassformer as gf
from benchmarks.common import interleaved_medians
from glassformer.nn.hooks import HookPoint


def main() -> None:
    warnings.filterwarnings("ignore")
    import transformers

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--d-model", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    torch.manual_seed(0)
    hf_config = transformers.GPT2Config(
        vocab_size=50257, n_positions=1024, n_embd=args.d_model, n_layer=args.layers, n_head=args.heads
    )
    hf = transformers.GPT2LMHeadModel(hf_config).eval()  # attn_implementation: sdpa (HF default)
    lm = gf.from_hf(hf)
    net = lm.net
    ids = torch.randint(0, hf_config.vocab_size, (args.batch, args.seq))
    print(
        f"GPT-2 shape: {args.layers} layers, d_model={args.d_model}, {args.heads} heads, "
        f"batch {args.batch} x {args.seq} tokens; torch threads {torch.get_num_threads()}; "
        f"HF attention: {hf.config._attn_implementation}"
    )

    with torch.inference_mode():
        diff = (hf(ids).logits - net(ids)).abs().max().item()

        def ours_explicit():
            with net.attention_impl("explicit"):
                net(ids)

        times = interleaved_medians(
            {
                "ours (fused)": lambda: net(ids),
                "ours (explicit)": ours_explicit,
                "HF transformers": lambda: hf(ids),
            },
            repeats=args.repeats,
        )
    hf_s = times["HF transformers"]
    for name, seconds in times.items():
        print(f"{name:<18} {seconds * 1000:9.1f} ms   ratio to HF {seconds / hf_s:5.2f}")
    print(f"max |logits ours - HF| = {diff:.2e}")
    print(f"goal ours (fused) / HF <= 1.0: {times['ours (fused)'] / hf_s:.2f}")

    point, x, n = HookPoint("probe"), torch.zeros(1), 200_000
    start = time.perf_counter()
    for _ in range(n):
        point(x)
    per_call = (time.perf_counter() - start) / n
    points = len(net.hook_points)
    overhead = per_call * points
    print(
        f"unused hook points: {points} per forward x {per_call * 1e9:.0f} ns = {overhead * 1e6:.1f} us "
        f"({overhead / times['ours (fused)'] * 100:.3f}% of a forward)"
    )


if __name__ == "__main__":
    main()
