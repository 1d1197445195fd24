"""``glassformer chat [MODEL]``: a conversation with an instruct model in the terminal."""

from __future__ import annotations

import argparse

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
        "chat",
        help="chat with an instruct model in the terminal",
        description="A conversation with an instruct model (default: SmolLM2-135M-Instruct), laid out by "
        "its own chat template, replies streamed token by token. An empty line or 'exit' ends it.",
    )
    parser.add_argument(
        "model",
        nargs="?",
        default="smollm2-135m-instruct",
        help=f"registry name (default: smollm2-135m-instruct), .gguf file, HF directory, {HUB_ID_HELP}",
    )
    parser.add_argument("--dtype", choices=list(DTYPES), default="float32", help=DTYPE_HELP)
    add_decode_weights_flag(parser)
    add_quantize_flag(parser)
    parser.add_argument("--system", default=None, help="a system message (default: the template's own)")
    add_generation_flags(parser, max_new_tokens=256)  # a reply, not a continuation
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from glassformer.chat import chat_loop
    from glassformer.loading import load

    lm = load(args.model, args.dtype)
    quantize_weights(lm, args.quantize, print)
    use_decode_weights(lm, args.decode_weights, print)
    chat_loop(lm, system=args.system, **chosen_generation_options(args))
    return 0
