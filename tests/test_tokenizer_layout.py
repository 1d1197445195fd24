"""The tokenizers package keeps its shape: imports between its modules flow one way (no cycle,
counting imports inside functions), and every module stays under 400 lines (STYLE.md)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import glassformer.tokenizers

PACKAGE = Path(glassformer.tokenizers.__file__).parent
NAME = "glassformer.tokenizers"
MAX_LINES = 400


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports anywhere (top level or inside a function)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            # "from glassformer.tokenizers import bpe" imports the module bpe
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {name.removeprefix(NAME + ".") for name in names if name.startswith(NAME + ".")}
    return found & modules


def test_imports_inside_tokenizers_have_no_cycle():
    modules = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    graph = {stem: imported_modules(PACKAGE / f"{stem}.py", modules) for stem in modules}
    assert graph["bpe"] and graph["hf_json"] and graph["loading"]  # the parse sees imports at all
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as error:
        raise AssertionError(
            f"import cycle in glassformer.tokenizers: {' -> '.join(error.args[1])}"
        ) from None
    assert order.index("special") < order.index("bpe") < order.index("bpe_train")


def test_every_module_is_under_400_lines():
    sizes = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in PACKAGE.glob("*.py")}
    assert {name: n for name, n in sizes.items() if n >= MAX_LINES} == {}
