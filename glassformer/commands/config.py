"""``glassformer config [...]``: print a validated ModelConfig as JSON.

Model flags are generated from `ModelConfig`'s fields, so every architectural choice has
a flag (``--n-kv-heads 2``, ``--positions rope``, ``--no-tie-embeddings``) and the same
validation and messages as the Python API.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing

from glassformer import config_checks
from glassformer.config import ModelConfig

CHOICES = {**config_checks.CHOICES, "classifier_pooling": config_checks.CLASSIFIER_POOLINGS}


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "config",
        help="print a validated model configuration as JSON",
        description="Validate a model configuration given as flags and print it as JSON, with its size.",
    )
    add_config_flags(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from glassformer.models import build

    config = config_from_args(args)
    print(config.to_json())
    print(f"# {build(config).num_parameters():,} parameters", file=sys.stderr)
    return 0


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
        flag = "--" + field.name.replace("_", "-")
        hint = hints[field.name]
        optional = type(None) in typing.get_args(hint)
        base = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
        default = field.default
        if base is bool:
            group.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=None, help=f"(default: {default})"
            )
        elif typing.get_origin(hint) is tuple:  # --class-names comedy,history,tragedy
            group.add_argument(
                flag,
                type=lambda text: tuple(part.strip() for part in text.split(",")),
                default=None,
                metavar="A,B,...",
                help=f"comma-separated (default: {', '.join(default) or 'none'})",
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
        if getattr(args, f.name, None) is not None
    }
    if base is None:
        return ModelConfig(**changes)
    return dataclasses.replace(base, **changes)
