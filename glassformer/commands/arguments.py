"""Flag types and flag groups that several commands share."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from glassformer.sampling import SAMPLING_DEFAULTS

# LanguageModel.stream's arguments that the generate and chat commands expose
GENERATION_FLAGS = ("max_new_tokens", "temperature", "top_k", "top_p", "seed")


def at_least(least: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``least``, else a usage error naming the bound."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be >= {least}, got {value}")
        return value

    parse.__name__ = "int"
    return parse


def add_generation_flags(parser: argparse.ArgumentParser, max_new_tokens: int | None = None) -> None:
    """--max-new-tokens, --temperature, --top-k, --top-p, --seed. A flag left out stays None
    and is not passed on (`chosen_generation_options`), so `LanguageModel.stream`'s own
    default applies; ``max_new_tokens`` gives that flag a default of the command's."""
    group = parser.add_argument_group("generation (a flag left out leaves LanguageModel.stream's default)")
    group.add_argument(
        "--max-new-tokens",
        type=at_least(1),
        default=max_new_tokens,
        help=f"most tokens to generate (default: {max_new_tokens or 64})",
    )
    group.add_argument(
        "--temperature",
        type=float,
        default=None,
        help=f"0 = greedy (default: {SAMPLING_DEFAULTS['temperature']})",
    )
    group.add_argument(
        "--top-k",
        type=at_least(1),
        default=None,
        help="keep the k likeliest tokens (default: no top-k filter)",
    )
    group.add_argument(
        "--top-p",
        type=float,
        default=None,
        help=f"keep the smallest nucleus of mass p; 1 = off (default: {SAMPLING_DEFAULTS['top_p']})",
    )
    group.add_argument("--seed", type=int, default=None, help="random seed of the sampling (default: 0)")


def chosen_generation_options(args: argparse.Namespace) -> dict[str, Any]:
    """The generation flags that were given (or have a command default), as keyword arguments."""
    return {name: getattr(args, name) for name in GENERATION_FLAGS if getattr(args, name) is not None}
