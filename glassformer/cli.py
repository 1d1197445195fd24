"""The ``glassformer`` command: a list of subcommands, each registered by its own module.

    glassformer lessons [...]           the course's lessons: list, show, run, export as notebooks
    glassformer demo                    train a small Llama-style model to copy, look inside
    glassformer config [...]            print a validated ModelConfig as JSON (every field is a flag)
    glassformer data shakespeare        fetch and cache the Shakespeare corpus
    glassformer train --preset NAME     train a model from a preset (Ctrl-C saves; --resume)
    glassformer generate MODEL "text"   stream a continuation
    glassformer eval RUN                recompute a run's validation figures
    glassformer runs                    list the runs and their best validation loss
    glassformer chat [MODEL]            chat with an instruct model (default: SmolLM2-135M-Instruct)
    glassformer export MODEL OUT_DIR    write a model as a Hugging Face checkpoint directory
    glassformer inspect MODEL "text"    look inside: attention, logit lens, attributions
    glassformer count MODEL             parameters, FLOPs per token, KV-cache and activation memory
    glassformer tokenize "text" [...]   show tokens, ids and offsets (--explain: the merges)
    glassformer tokenizer train [...]   train a byte-level BPE tokenizer on a corpus
    glassformer --version

Each module in `glassformer.commands` adds its parser with ``register`` and names the
function that runs it (see `glassformer.commands`).
"""

from __future__ import annotations

import argparse
import sys

from glassformer.commands import (
    chat,
    config,
    count,
    data,
    demo,
    evaluate,
    export,
    generate,
    inspect,
    lessons,
    runs,
    tokenize,
    tokenizer,
    train,
    workshop,
)

# in the order `glassformer --help` lists them
COMMANDS = (
    workshop,
    lessons,
    demo,
    config,
    data,
    train,
    generate,
    evaluate,
    runs,
    chat,
    export,
    inspect,
    count,
    tokenize,
    tokenizer,
)


def build_parser() -> argparse.ArgumentParser:
    from glassformer import __version__

    parser = argparse.ArgumentParser(
        prog="glassformer",
        description="Glassformer: a transformer workshop you can see through.",
        epilog="Run 'glassformer COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"glassformer {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(commands)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """``argv`` read by ``parser``, a command's options and its words in any order.

    argparse fills an optional word (``generate MODEL [PROMPT]``, ``workshop [MODEL ...]``) with
    its default as soon as it meets the first option, so ``generate MODEL --top-k 5 "text"``
    leaves "text" over. Such a command is read again with its own parser's
    ``parse_intermixed_args``, which takes the options first and then the words."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args, left_over = parser.parse_known_args(argv)
    command = subcommands(parser).get(args.command) if args.command else None
    if not left_over or command is None or subcommands(command):  # nothing over, or nested actions
        return parser.parse_args(argv)  # argparse's own error, if any
    rest = argv[argv.index(args.command) + 1 :]
    return argparse.Namespace(command=args.command, **vars(command.parse_intermixed_args(rest)))


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``parser``'s subcommands by name (none if it has none)."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.handler(args)
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        print(f"glassformer: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
