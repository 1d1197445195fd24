"""``glassformer tokenize "text" [--tokenizer NAME] [--explain]``: how a tokenizer splits a text."""

from __future__ import annotations

import argparse
import sys


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "tokenize",
        help="show how a tokenizer splits a text",
        description="Print the text with each token coloured, then every token's id, text and character "
        "offsets. --explain shows the BPE merges applied to each pre-token, in order.",
    )
    parser.add_argument("text", help="the text to tokenize ('-' reads standard input)")
    parser.add_argument(
        "--tokenizer",
        default="gpt2",
        help="a name (gpt2, cl100k, smollm2, minilm) or a tokenizer file/directory (default: gpt2)",
    )
    parser.add_argument(
        "--pattern", default=None, help="pre-tokenization pattern for .tiktoken files (gpt2, cl100k)"
    )
    parser.add_argument("--explain", action="store_true", help="also show the merge steps per pre-token")
    parser.add_argument(
        "--allow-special", action="store_true", help="encode special-token text as special tokens"
    )
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour tokens in the terminal (default: auto, when printing to a terminal)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from glassformer.tokenizers import load_tokenizer
    from glassformer.tokenizers.display import render, render_explanation

    text = sys.stdin.read() if args.text == "-" else args.text
    tokenizer = load_tokenizer(args.tokenizer, pattern=args.pattern)
    options = {"allowed_special": "all"} if args.allow_special else {}
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    print(render(tokenizer, text, color=color, **options))
    if args.explain:
        print()
        print(render_explanation(tokenizer.explain(text, **options)))
    return 0
