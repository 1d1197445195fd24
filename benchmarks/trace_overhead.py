"""What tracing costs: SmolLM2 at 256 tokens, plain forward vs traced, same run.

* plain: ``lm.net(ids)`` under no_grad;
* patterns only: ``lm.trace(ids, "blocks.*.attn.pattern")`` (what the attention views
  need; attention runs explicitly in every layer to produce the weights);
* full trace: ``lm.trace(ids, "*")`` (every name of the trace contract, copied out).

Goal: patterns only <= 1.3x the plain forward. Run in turn (ABCABC...), medians.

    python -m benchmarks.trace_overhead [--tokens 256 --repeats 5]
"""

from __future__ import annotations

import argparse

import torch

import glassformer as gf
from benchmarks.common import interleaved_medians


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    lm = gf.load(args.model)
    ids = torch.randint(0, lm.config.vocab_size, (1, args.tokens), generator=torch.Generator().manual_seed(0))

    def plain():
        with torch.no_grad():
            return lm.net(ids)

    times = interleaved_medians(
        {
            "plain forward": plain,
            "patterns only": lambda: lm.trace(ids, "blocks.*.attn.pattern"),
            "full trace": lambda: lm.trace(ids, "*"),
        },
        repeats=args.repeats,
    )
    full = lm.trace(ids, "*")
    megabytes = sum(t.numel() * t.element_size() for t in full.values()) / 1e6
    base = times["plain forward"]
    print(f"{args.model}, {args.tokens} tokens, {torch.get_num_threads()} threads (median of {args.repeats})")
    for name, seconds in times.items():
        print(f"  {name:<14} {seconds * 1e3:8.1f} ms  {seconds / base:5.2f}x")
    print(f"  full trace holds {len(full)} tensors, {megabytes:.0f} MB")


if __name__ == "__main__":
    main()
