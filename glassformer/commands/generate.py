"""``glassformer generate MODEL "prompt"``: stream a continuation to the terminal."""

from __future__ import annotations

import argparse
import sys

from glassformer.commands.arguments import (
    HUB_ID_HELP,
    add_decode_weights_flag,
    add_generation_flags,
    add_quantize_flag,
    chosen_generation_options,
    quantize_weights,
    use_decode_weights,
)


def register(commands: argparse._SubParsersAction) -> None:
    from glassformer.formats.registry import DTYPE_HELP, DTYPES

    parser = commands.add_parser(
        "generate",
        help="generate text from a trained run or a pretrained model",
        description="Load a model and stream a continuation of the prompt to the terminal.",
    )
    parser.add_argument(
        "model",
        help="a run directory (made by glassformer train), a registry name (smollm2-135m-instruct), "
        f"a .gguf file, a Hugging Face checkpoint directory, {HUB_ID_HELP}",
    )
    parser.add_argument("prompt", nargs="?", default="\n", help="the text to continue (default: a newline)")
    add_generation_flags(parser, max_new_tokens=300)
    parser.add_argument("--dtype", choices=list(DTYPES), default="float32", help=DTYPE_HELP)
    add_decode_weights_flag(parser)
    add_quantize_flag(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from glassformer.loading import load

    lm = load(args.model, args.dtype)
    if lm.tokenizer is None:
        raise ValueError(f"{args.model} has no tokenizer, so it cannot generate from text")
    quantize_weights(lm, args.quantize, lambda line: print(line, file=sys.stderr))
    use_decode_weights(lm, args.decode_weights, lambda line: print(line, file=sys.stderr))
    sys.stdout.write(args.prompt)
    for piece in lm.stream(args.prompt, **chosen_generation_options(args)):
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0
