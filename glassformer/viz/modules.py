"""The views' assets (``glassformer/viz/assets``, package data): ES modules, inlined into a
notebook cell or a saved HTML file as classic scripts, where an import cannot reach a file.

Every script in ``assets`` is an ES module: ``blocks.js`` (the array decoder), ``colours.js``
(one colour scale per quantity), ``paint.js`` (the heatmap painter), ``lines.js`` (query-to-key
lines) and ``query_key_terms.js`` (q ⊙ k) are shared with the workshop, which imports them from
``static/viz/`` (`SHARED`); ``payload.js`` (the one payload reader), ``core.js`` (the views'
library) and one module per view (``head_view.js``, ...) build the notebook views on them.

A notebook cell has no server to fetch a module from, so `inlined` rewrites a module and
everything it imports, each once and dependencies first, as classic scripts. Each registers its
exports under its file name on ``window.glassformerViews.modules`` and reads its imports from
there; a module already registered (a second view on the page, or a second copy of the library)
is skipped, so the first copy serves them all. The rewrite is small and exact for the form
these modules keep to: ``export`` before top-level declarations or ``export { a, b };``, and
imports only of each other, ``import { a, b as c } from "./x.js";`` or
``import * as x from "./x.js";``.

>>> [name for name, _ in inlined("head_view.js")]
['blocks.js', 'colours.js', 'paint.js', 'payload.js', 'core.js', 'lines.js', 'head_view.js']
>>> script = classic_script("paint.js")
>>> "export " in script, 'modules["paint.js"] = Object.freeze({ paint });' in script
(False, True)
"""

from __future__ import annotations

import functools
import re
from importlib import resources

# The modules the workshop imports too (from static/viz/), in the order their imports need.
SHARED = ("blocks.js", "colours.js", "paint.js", "lines.js", "query_key_terms.js")

DECLARED = re.compile(r"^export (?:async )?(?:function\*?|const|let|class) (\w+)", re.M)
LISTED = re.compile(r"^export \{([^}]*)\};$", re.M)
IMPORT = re.compile(r'^import (?:\{([^}]*)\}|\* as (\w+)) from "\./([\w.]+\.js)";$', re.M)
ANY_EXPORT = re.compile(r"^export\b", re.M)
ANY_IMPORT = re.compile(r"^import\b", re.M)
REGISTRY = "((window.glassformerViews = window.glassformerViews || {}).modules ||= {})"


@functools.cache
def asset(name: str) -> str:
    """The text of ``glassformer/viz/assets/<name>`` (package data)."""
    text = resources.files("glassformer.viz").joinpath("assets", name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():
        raise ValueError(f"asset {name} contains a closing tag and cannot be inlined")
    return text


def imports(name: str) -> list[str]:
    """The assets module ``name`` imports, in the order it imports them."""
    return [match[3] for match in IMPORT.finditer(asset(name))]


def _binding(match: re.Match[str]) -> str:
    """One import as a constant read from the registry: ``{ a, b as c }`` or ``* as x``."""
    source = f'modules["{match[3]}"]'
    if match[2]:
        return f"const {match[2]} = {source};"
    names = [part.strip() for part in match[1].split(",") if part.strip()]
    return f"const {{ {', '.join(n.replace(' as ', ': ') for n in names)} }} = {source};"


@functools.cache
def classic_script(name: str) -> str:
    """The ES module ``assets/<name>`` as a classic script that registers its exports as
    ``window.glassformerViews.modules[name]`` (and reads its imports from there); it does
    nothing when that module is already on the page."""
    text = asset(name)
    listed = [n.strip() for match in LISTED.findall(text) for n in match.split(",") if n.strip()]
    names = DECLARED.findall(text) + listed
    body = LISTED.sub("", text)
    if len(ANY_EXPORT.findall(body)) != len(DECLARED.findall(body)):
        raise ValueError(f"{name}: only 'export function / const / let / class' or 'export {{ a }};' inline")
    body = IMPORT.sub(_binding, body)
    if ANY_IMPORT.search(body):
        raise ValueError(f"{name}: only 'import {{ a }} from \"./x.js\";' or 'import * as x' inline")
    body = DECLARED.sub(lambda match: match[0].removeprefix("export "), body)
    return (
        "(function (modules) {\n"
        '"use strict";\n'
        f'if (modules["{name}"]) return; // already on this page: that copy serves every view\n'
        f"{body.strip()}\n"
        f'modules["{name}"] = Object.freeze({{ {", ".join(names)} }});\n'
        f"}})({REGISTRY});"
    )


def inlined(name: str) -> tuple[tuple[str, str], ...]:
    """``name`` and every module it imports, directly or not, each once and after its own
    imports: (file name, classic script) pairs, in the order a page must run them."""
    order: list[str] = []

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            raise ValueError(f"import cycle: {' -> '.join((*path, module))}")
        if module in order:
            return
        for dependency in imports(module):
            visit(dependency, (*path, module))
        order.append(module)

    visit(name, ())
    return tuple((module, classic_script(module)) for module in order)
