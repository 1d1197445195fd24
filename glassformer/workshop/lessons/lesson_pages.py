"""The course's lessons as workshop pages: Markdown to HTML, links into the walk and the code,
and a lesson run on the server so its numbers are this machine's.

`catalog()` lists the lessons; `page(lesson, models)` gives one as cells::

    {"number", "title", "summary", "name",
     "cells": [{"kind": "markdown", "html": str} | {"kind": "code", "source": str}]}

The Markdown is rendered by markdown-it-py (CommonMark, tables, ``$...$`` and ``$$...$$``
kept as ``<span class="math inline">`` / ``<div class="math block">`` for KaTeX in the
browser), with raw HTML off: a cell's ``html`` is only what markdown-it makes, every text and
attribute in it escaped (a walk link's model name, which can be a run's folder name, too).
It is the one HTML the page parses (lessons.js `lessonMarkup`). The course's own links become
page links:

* ``walk:STAGE[?model=NAME&text=TEXT]`` -> ``./?model=M&stage=STAGE&level=intermediate``
  (and the text): the walk with that step open, on the model named, else on the first
  model that has the step; a step no model here has stays text (``class="link-missing"``);
* ``code:DOTTED`` -> a link the page answers with `source(DOTTED)`: the function's file,
  first line and source. Only names some lesson links to are served (the browser never
  makes the server import what it likes).

`run(lesson)` executes the lesson in a fresh kernel (`glassformer.lessons.run.execute`,
working directory a temporary folder) and returns what each code cell showed::

    {"seconds": float, "outputs": [{"text": str, "images": [base64 PNG]}] (one per code cell)}

An output's ``text`` (streams, ``text/plain`` reprs) and a failing cell's error are plain text,
never joined into HTML: the page sets them as text. A cell's ``text/html`` output is not sent.
"""

from __future__ import annotations

import inspect
import tempfile
import textwrap
import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from glassformer.lessons.catalog import Lesson, lessons, links, resolve_code, to_notebook
from glassformer.lessons.run import LessonFailed, code_cells, execute
from glassformer.workshop.walk.architecture import stages
from glassformer.workshop.walk.stage_catalogue import code_location

RUN_TIMEOUT_S = 120  # per cell


def catalog() -> list[dict[str, Any]]:
    """Every lesson: number, name, title, summary, and the walk's steps it links to (their
    ids without ``?model=...``: the walk links back to the lessons from those steps)."""
    return [
        {
            "number": x.number,
            "name": x.name,
            "title": x.title,
            "summary": x.summary,
            "stages": sorted({urlsplit(target).path for kind, target, _ in links(x) if kind == "walk"}),
        }
        for x in lessons()
    ]


def page(item: Lesson, models: dict[str, Any]) -> dict[str, Any]:
    """One lesson as cells of HTML and code (see the module docstring)."""
    renderer = _markdown(models)
    cells = []
    for cell in to_notebook(item).cells:
        if cell.cell_type == "code":
            cells.append({"kind": "code", "source": cell.source})
        elif cell.source.strip():
            cells.append({"kind": "markdown", "html": renderer.render(cell.source)})
    return {
        "number": item.number,
        "name": item.name,
        "title": item.title,
        "summary": item.summary,
        "cells": cells,
    }


def source(dotted: str) -> dict[str, Any]:
    """The source of a function or class a lesson links to: {name, file, line, source}."""
    if dotted not in {target for x in lessons() for kind, target, _ in links(x) if kind == "code"}:
        raise ValueError(f"no lesson links to {dotted!r}: only the code the lessons name is shown")
    target = inspect.unwrap(resolve_code(dotted))
    where = code_location(target)  # the file and first line, as the walk names them
    lines, _ = inspect.getsourcelines(target)
    return {
        "name": dotted,
        "file": where["file"],
        "line": where["line"],
        "source": textwrap.dedent("".join(lines)),
    }


def run(item: Lesson, cancel: threading.Event | None = None) -> dict[str, Any]:
    """Run the lesson top to bottom; what each code cell showed (see the module docstring).
    A failing cell is a ValueError naming the cell and its error; setting ``cancel`` kills
    its kernel (`LessonCancelled`)."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="glassformer-lesson-") as cwd:
        try:
            notebook = execute(item, cwd, timeout=RUN_TIMEOUT_S, cancel=cancel)
        except LessonFailed as failure:
            raise ValueError(f"code cell {failure.index} failed: {failure.error}") from None
    outputs = [_shown(cell) for cell in code_cells(notebook)]
    return {"seconds": time.perf_counter() - start, "outputs": outputs}


def _shown(cell) -> dict[str, Any]:
    """A code cell's streams and text results, and its PNG images."""
    text, images = [], []
    for output in cell.get("outputs", ()):
        if output.output_type == "stream":
            text.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            data = output.get("data", {})
            if "image/png" in data:
                images.append(data["image/png"].replace("\n", ""))
            elif "text/plain" in data:
                text.append(data["text/plain"] + "\n")
    return {"text": "".join(text), "images": images}


def _markdown(models: dict[str, Any]):
    """A markdown-it renderer whose ``walk:`` and ``code:`` links point into the workshop."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    # raw HTML off: the lessons hold none, and no markup can reach the page but markdown-it's
    renderer = MarkdownIt("commonmark", {"html": False}).enable("table")
    renderer.use(dollarmath_plugin, double_inline=True)
    steps = {name: {s["id"] for s in stages(lm.net)} for name, lm in models.items()}

    def link_open(self, tokens, index, options, env):
        token = tokens[index]
        href = token.attrGet("href") or ""
        if href.startswith("walk:"):
            _walk_link(token, href[len("walk:") :], steps)
        elif href.startswith("code:"):
            token.attrSet("href", "#code")
            token.attrSet("data-code", href[len("code:") :])
            token.attrSet("class", "code-link")
        return self.renderToken(tokens, index, options, env)

    renderer.add_render_rule("link_open", link_open)
    return renderer


def _walk_link(token, target: str, steps: dict[str, set[str]]) -> None:
    """Point ``token`` (a link) at the walk with step ``target`` ("STAGE[?model=NAME]") open."""
    parts = urlsplit(target)
    query = {key: values[0] for key, values in parse_qs(parts.query).items()}
    stage, wanted = parts.path, query.get("model")
    having = [name for name, ids in steps.items() if stage in ids]
    model = wanted if wanted in having else (having[0] if having else None)
    token.attrSet("data-stage", stage)
    if model is None:
        token.attrSet("href", "#")
        token.attrSet("class", "walk-link link-missing")
        token.attrSet("title", f"no model in this workshop has the step {stage}")  # escaped by markdown-it
        return
    shown = {"model": model, "stage": stage, "level": "intermediate"} | (
        {"text": query["text"]} if "text" in query else {}
    )
    token.attrSet("href", "./?" + urlencode(shown))
    token.attrSet("class", "walk-link")
    token.attrSet("title", f"open the step {stage} of {model}'s forward pass")
