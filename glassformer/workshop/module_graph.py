"""The page's ES modules, preloaded: a fresh browser fetches them all at once.

A module's imports are known only once it has arrived and been parsed, so a page of 39
modules loads in waves (main.js, then what it imports, then what those import...), each a
round trip. `with_preloads` writes a ``<link rel="modulepreload">`` for every module the
entry imports, directly or not, into the page before its script tag: the browser asks for
all of them at once. The list is read from the files' own ``import`` lines when the server
starts, so it cannot go stale.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

IMPORT = re.compile(r'^\s*(?:import|export)\s[^;]*?\sfrom\s+"([^"]+)"|^\s*import\s+"([^"]+)"', re.M)


def imported(roots: dict[str, Path], entry: str) -> list[str]:
    """``entry`` ("js/main.js") and every module it imports, in the order they are found, as
    paths under the static URL; ``roots`` maps a path's prefix to the folder that serves it
    ({"": static, "viz/": the views' assets}: the longest prefix wins)."""
    found, todo = [], [entry]
    while todo:
        path = todo.pop(0)
        if path in found:
            continue
        found.append(path)
        prefix = max((p for p in roots if path.startswith(p)), key=len)
        source = roots[prefix] / path[len(prefix) :]
        for relative, bare in IMPORT.findall(source.read_text(encoding="utf-8")):
            todo.append(posixpath.normpath(posixpath.join(posixpath.dirname(path), relative or bare)))
    return found


def with_preloads(page: Path, roots: dict[str, Path], entry: str) -> str:
    """The HTML of ``page`` with a modulepreload link per module of ``entry``, placed before
    the script tag that loads it."""
    html = page.read_text(encoding="utf-8")
    script = f'<script type="module" src="static/{entry}"></script>'
    if script not in html:
        raise ValueError(f"{page.name} has no {script}")
    links = "".join(f'<link rel="modulepreload" href="static/{path}">\n  ' for path in imported(roots, entry))
    return html.replace(script, links + script)
