"""``glassformer demo``: train a small model to copy, then trace its induction head."""

from __future__ import annotations

import argparse

from glassformer.commands.arguments import at_least


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "demo",
        help="train a small model to copy, then trace its induction head",
        description="Build a small Llama-style decoder, train it on repeated random sequences for a few "
        "seconds, generate with and without the KV cache, and find its induction head in a trace.",
    )
    parser.add_argument("--steps", type=at_least(1), default=200, help="training steps (default: 200)")
    parser.add_argument(
        "--length", type=at_least(2), default=24, help="length of the repeated sequence (default: 24)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from glassformer import demo

    demo.run(steps=args.steps, length=args.length, seed=args.seed)
    return 0
