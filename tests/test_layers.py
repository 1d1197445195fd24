"""Imports flow one way: the layer table of docs/architecture.md, checked against the code.

Every module of the package is read (not imported) and each ``import`` statement,
module-level or inside a function, must name a module of its own layer or of a layer
above it. The same table is printed in docs/architecture.md; a test compares the two.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "glassformer"

# (layer, the modules in it): a module may import its own layer and the layers above it.
LAYERS = [
    (
        "config",
        ["glassformer.config", "glassformer.config_checks", "glassformer.atomic", "glassformer.data_home"],
    ),
    ("building blocks", ["glassformer.nn"]),
    (
        "fast paths",
        [
            "glassformer.fast",
            "glassformer.fast_decode",
            "glassformer.fast_int8",
            "glassformer.fast_blocks",
            "glassformer.block_quant",
            "glassformer.quantized_model",
        ],
    ),
    ("models", ["glassformer.models"]),
    ("tokenizers", ["glassformer.tokenizers"]),
    ("formats", ["glassformer.formats"]),
    ("inputs", ["glassformer.inputs"]),
    ("generation", ["glassformer.sampling", "glassformer.generate"]),
    ("facade", ["glassformer.lm", "glassformer.loading", "glassformer.lora"]),
    ("training", ["glassformer.train"]),
    ("inspection", ["glassformer.inspect"]),
    ("views", ["glassformer.viz"]),
    ("lessons", ["glassformer.lessons"]),
    ("workshop", ["glassformer.workshop"]),
    (
        "entry points",
        ["glassformer.chat", "glassformer.demo", "glassformer.commands", "glassformer.cli", "glassformer"],
    ),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    """The index of the layer holding ``module`` (the longest matching prefix wins)."""
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS and docs/architecture.md")
    return best


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every glassformer import in the file, wherever it stands."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("glassformer")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("glassformer"):
                for alias in node.names:  # `from glassformer.nn import hooks` names a module
                    sub = f"{node.module}.{alias.name}"
                    is_module = (PACKAGE.parent / sub.replace(".", "/")).with_suffix(".py").exists() or (
                        PACKAGE.parent / sub.replace(".", "/")
                    ).is_dir()
                    found.append((node.lineno, sub if is_module else node.module))
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_go_only_to_the_same_layer_or_above(path):
    own = layer_of(module_name(path))
    for line, target in imported_modules(path):
        if layer_of(target) > own:
            pytest.fail(
                f"{path.relative_to(ROOT)}:{line} imports {target} ({LAYERS[layer_of(target)][0]}), "
                f"a layer below {module_name(path)} ({LAYERS[own][0]})"
            )


def test_no_import_cycles_between_files():
    graph = {module_name(p): {t for _, t in imported_modules(p)} for p in SOURCES}
    graph = {m: sorted(t for t in targets if t in graph and t != m) for m, targets in graph.items()}

    def reaches(start: str, goal: str) -> list[str] | None:
        """A path of imports from start to goal, or None."""
        paths, seen = [[start]], {start}
        while paths:
            path = paths.pop()
            for nxt in graph[path[-1]]:
                if nxt == goal:
                    return [*path, nxt]
                if nxt not in seen:
                    seen.add(nxt)
                    paths.append([*path, nxt])
        return None

    for module, targets in graph.items():
        for target in targets:
            back = reaches(target, module)
            assert back is None, "import cycle: " + " -> ".join([module, *back])


def test_architecture_document_lists_the_same_layers():
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = re.search(r"<!-- layers -->(.*?)<!-- /layers -->", text, re.S).group(1)
    rows = [r for r in table.strip().splitlines()[2:] if r.startswith("|")]
    documented = [r.split("|")[1].strip() for r in rows]
    assert documented == [name for name, _ in LAYERS]
    for row, (_, modules) in zip(rows, LAYERS, strict=True):
        for module in modules:
            assert f"`{module}`" in row, (
                f"docs/architecture.md: the {row.split('|')[1].strip()} row lacks `{module}`"
            )


def test_every_module_is_under_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in SOURCES if (n := len(p.read_text().splitlines())) >= 400}
    assert not long, f"modules of 400 lines or more (split them by concept): {long}"
