"""`hook_name` is the one place that spells a block's hook name (issue 29).

The scan below reads every Python module of the package and fails on a string that builds a
block's hook name by hand: a literal that starts with ``blocks.0.`` / ``blocks.*.`` (after an
optional ``encoder.`` / ``decoder.``), or an f-string whose text around its fields reads
``{prefix}blocks.{i}`` or starts with ``blocks.{i}``. Docstrings stay free to show names (they
teach them); a name inside a sentence (``"stack the layers: trace.stack('blocks.*...')"``) is
not a name being built; parameter paths (``f"stack.blocks.{i}"``) are not hook names.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

import glassformer
from glassformer.config import ModelConfig
from glassformer.models import build
from glassformer.nn.hooks import hook_name

PACKAGE = Path(glassformer.__file__).parent
FIELD = "{}"  # what an f-string's field reads as in the scan
# a block's hook name at the start of a string, or right after a field (a stack prefix)
BLOCK_NAME = re.compile(r"(?:^|\{\})(?:(?:encoder|decoder)\.)?blocks\.(?:\{\}|\d+|\*)(?:\.|$)")
HOME = {"nn/hooks.py"}  # the helper's own module


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constant nodes that are docstrings."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _text(node: ast.JoinedStr) -> str:
    return "".join(
        part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else FIELD
        for part in node.values
    )


def hand_built_names(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string in ``source`` that builds a block's hook name by hand."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    inside_fstring = {
        id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = _text(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in skip or id(node) in inside_fstring:
                continue
            text = node.value.replace("{", "{{")  # a plain literal has no fields
        else:
            continue
        if BLOCK_NAME.search(text):
            found.append((node.lineno, text))
    return sorted(found)


def scan(package: Path = PACKAGE) -> dict[str, list[tuple[int, str]]]:
    """{module path: hand-built names} over the package, the helper's home left out."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel in HOME:
            continue
        if found := hand_built_names(path.read_text()):
            out[rel] = found
    return out


def test_no_module_spells_a_block_hook_name():
    found = scan()
    listing = "\n".join(
        f"  glassformer/{rel}:{line}: {text!r}" for rel, hits in found.items() for line, text in hits
    )
    assert not found, f"build these hook names with glassformer.nn.hooks.hook_name:\n{listing}"


@pytest.mark.parametrize(
    "source",
    [
        'names = [f"{prefix}blocks.{i}.resid_post" for i in range(n)]',
        'name = f"blocks.{layer}.attn.z"',
        'trace = lm.trace(text, "blocks.*.attn.pattern")',
        'x = trace["decoder.blocks.0.cross_attn.pattern"]',
        'names = f"{prefix}blocks.*.attn.pattern"',
        "raise ValueError(f'capture it with names=\"{prefix}blocks.*.{kind}.pattern\"')",
    ],
)
def test_the_scan_finds_a_planted_literal(source):
    assert len(hand_built_names(source)) == 1


@pytest.mark.parametrize(
    "source",
    [
        'def f():\n    """trace["blocks.0.attn.pattern"] is b h t s."""',
        'ours, theirs = f"stack.blocks.{i}", f"model.layers.{i}"',
        'ours = f"{stack}.blocks.{i}"',
        "hint = \"stack the layers: trace.stack('blocks.*.attn.pattern')\"",
        'SHARED = ("blocks.js", "colours.js")',
        'name = hook_name("attn.pattern", layer, stack)',
    ],
)
def test_the_scan_passes_what_is_not_a_hand_built_name(source):
    assert hand_built_names(source) == []


def test_the_scan_finds_a_literal_planted_in_a_package(tmp_path):
    (tmp_path / "clean.py").write_text('NAME = "embed.out"\n')
    (tmp_path / "planted.py").write_text('"""doc: blocks.0.attn.q"""\nNAME = f"blocks.{3}.attn.q"\n')
    assert scan(tmp_path) == {"planted.py": [(2, "blocks.{}.attn.q")]}


@pytest.mark.parametrize("family", ["decoder", "encoder_decoder"])
def test_every_hook_point_is_named_by_hook_name(family):
    """The stack names its points with `hook_name`: parsing each name back gives it again."""
    config = ModelConfig(family=family, vocab_size=32, d_model=16, n_heads=2, n_layers=2, d_ff=32)
    torch.manual_seed(0)
    names = list(build(config).hook_points)
    assert hook_name("attn.pattern", 1, "decoder" if family != "decoder" else "") in names
    for name in names:
        parts = name.split(".")
        stack = parts.pop(0) if parts[0] in ("encoder", "decoder") else ""
        layer = None
        if parts[0] == "blocks":
            layer = int(parts[1])
            parts = parts[2:]
        assert hook_name(".".join(parts), layer, stack) == name
