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


def imported(static: Path, entry: str) -> list[str]:
    """``entry`` (a path under ``static``, "js/main.js") and every module it imports, in the
    order they are found."""
    found, todo = [], [entry]
    while todo:
        path = todo.pop(0)
        if path in found:
            continue
        found.append(path)
        for relative, bare in IMPORT.findall((static / path).read_text(encoding="utf-8")):
            todo.append(posixpath.normpath(posixpath.join(posixpath.dirname(path), relative or bare)))
    return found


def with_preloads(page: Path, static: Path, entry: str) -> str:
    """The HTML of ``page`` with a modulepreload link per module of ``entry``, placed before
    the script tag that loads it."""
    html = page.read_text(encoding="utf-8")
    script = f'<script type="module" src="static/{entry}"></script>'
    if script not in html:
        raise ValueError(f"{page.name} has no {script}")
    links = "".join(
        f'<link rel="modulepreload" href="static/{path}">\n  ' for path in imported(static, entry)
    )
    return html.replace(script, links + script)
