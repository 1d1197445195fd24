"""The views' assets (``glassformer/viz/assets``, package data), and the shared ES modules
among them inlined into a view, where an import cannot reach a file.

The workshop imports ``blocks.js`` (the array decoder), ``colours.js`` (one colour scale per
quantity) and ``paint.js`` (the heatmap painter) as ES modules; a notebook cell or a saved
HTML file has no server to fetch them from, so each is rewritten as a classic script that
puts its exports on ``window.glassformerViews.shared``, where the views' ``core.js`` finds
them. The rewrite is small and exact for the form these modules keep to: ``export`` before
top-level declarations, and imports only of each other (``import { a } from "./x.js"``),
which read the names from the same object.

>>> script = classic_script("paint.js")
>>> script.count("export "), "Object.assign(shared, { paint })" in script
(0, True)
"""

from __future__ import annotations

import functools
import re
from importlib import resources


@functools.cache
def asset(name: str) -> str:
    """The text of ``glassformer/viz/assets/<name>`` (package data)."""
    text = resources.files("glassformer.viz").joinpath("assets", name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():
        raise ValueError(f"asset {name} contains a closing tag and cannot be inlined")
    return text


SHARED = ("blocks.js", "colours.js", "paint.js")  # in the order their imports need
EXPORTED = re.compile(r"^export (?:async )?(?:function|const|let|class) (\w+)", re.M)
IMPORT = re.compile(r'^import \{([^}]*)\} from "\./[\w.]+";$', re.M)


@functools.cache
def classic_script(name: str) -> str:
    """The ES module ``assets/<name>`` as a classic script that adds its exports to the views'
    shared object (and takes its imports from it)."""
    text = asset(name)
    names = EXPORTED.findall(text)
    if re.search(r"^export (?!(?:async )?(?:function|const|let|class) )", text, re.M):
        raise ValueError(f"{name}: only 'export function / const / let / class' can be inlined")
    body = IMPORT.sub(lambda match: f"const {{{match[1]}}} = shared;", text)
    body = re.sub(r"^export ", "", body, flags=re.M)
    return (
        "(function (shared) {\n"
        f"{body}\n"
        f"Object.assign(shared, {{ {', '.join(names)} }});\n"
        "})(((window.glassformerViews = window.glassformerViews || {}).shared ||= {}));"
    )


def shared_scripts() -> tuple[str, ...]:
    """Every shared module, as classic scripts, in order."""
    return tuple(classic_script(name) for name in SHARED)
