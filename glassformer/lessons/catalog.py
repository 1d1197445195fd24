"""The lessons of the course: found, parsed, linked to the code and exported as notebooks.

A lesson is a file ``NN-slug.md`` beside this module (package data), in jupytext's Markdown
format: its first line is ``# N. Title``, the paragraph after it a one-sentence summary,
and its ```python blocks become the notebook's code cells. Links from an equation to the
workshop and to the code are ordinary Markdown links with two schemes of ours:

* ``[label](walk:blocks.0.attn.pattern)`` — a stage of the workshop's walk (optionally
  ``?model=NAME``);
* ``[label](code:glassformer.nn.attention.Attention)`` — the function or class computing it.

>>> first = lessons()[0]
>>> first.number, first.slug
(1, 'text-to-tokens')
>>> lesson("01") == lesson("text-to-tokens") == first
True
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from glassformer.atomic import write_text_atomic

LESSON_DIR = Path(__file__).resolve().parent
FILE_NAME = re.compile(r"^(\d{2})-([a-z0-9]+(?:-[a-z0-9]+)*)\.md$")
TITLE = re.compile(r"^#\s+(\d+)\.\s+(.+?)\s*$")
LINK = re.compile(r"\[([^\]]*)\]\((walk|code):([^)\s]+)\)")
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


@dataclass(frozen=True)
class Lesson:
    """One lesson: its number and slug (from the file name), title and summary (from the
    text), where it is and its whole Markdown text."""

    number: int
    slug: str
    title: str
    summary: str
    path: Path
    text: str

    @property
    def name(self) -> str:
        """``NN-slug``: the file name without ``.md``, also the exported notebook's name."""
        return f"{self.number:02d}-{self.slug}"


def read(path: str | Path) -> Lesson:
    """Parse one lesson file. ValueError when its name or its first lines break the format."""
    path = Path(path)
    match = FILE_NAME.match(path.name)
    if match is None:
        raise ValueError(f"{path.name}: a lesson file is named NN-slug.md (two digits, lowercase slug)")
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    title = TITLE.match(lines[0]) if lines else None
    if title is None:
        raise ValueError(f"{path.name}: the first line must be '# N. Title', not {lines[:1]}")
    if int(title.group(1)) != int(match.group(1)):
        raise ValueError(f"{path.name}: the title's number {title.group(1)} differs from the file name's")
    return Lesson(int(match.group(1)), match.group(2), title.group(2), _summary(lines[1:]), path, text)


def _summary(lines: list[str]) -> str:
    """The first paragraph after the title, joined into one line."""
    paragraph: list[str] = []
    for line in lines:
        if line.strip():
            paragraph.append(line.strip())
        elif paragraph:
            break
    if not paragraph or paragraph[0].startswith(("#", "```", "$$")):
        return ""
    return " ".join(paragraph)


def lessons() -> list[Lesson]:
    """Every lesson of the package, by number."""
    found = [read(path) for path in LESSON_DIR.glob("*.md") if FILE_NAME.match(path.name)]
    return sorted(found, key=lambda item: item.number)


def lesson(key: int | str | Path) -> Lesson:
    """One lesson by number (3, "3", "03"), slug ("attention-from-similarity"), file name
    ("03-attention-from-similarity") or the path of a lesson file (a lesson being written)."""
    if isinstance(key, Path) or (isinstance(key, str) and key.endswith(".md")):
        return read(key)
    every = lessons()
    text = str(key).strip()
    for item in every:
        if (text.isdigit() and int(text) == item.number) or text in (item.slug, item.name):
            return item
    listing = "\n".join(f"  {item.number:2d}  {item.slug}" for item in every) or "  (none)"
    raise ValueError(f"no lesson {key!r}; the lessons are (number or slug):\n{listing}")


def links(item: Lesson) -> list[tuple[str, str, str]]:
    """(kind, target, label) of every ``walk:`` and ``code:`` link, in the order they appear.

    >>> links(Lesson(0, "x", "X", "", Path("x.md"), "[walk: weights](walk:blocks.0.attn.pattern)"))
    [('walk', 'blocks.0.attn.pattern', 'walk: weights')]
    """
    return [(kind, target, label) for label, kind, target in LINK.findall(item.text)]


def resolve_code(dotted: str) -> object:
    """The object a ``code:`` link names: the longest importable module prefix, then
    attributes. ``resolve_code("glassformer.nn.masks.build_mask")`` is that function."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            target = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name is not None and not module_name.startswith(error.name):
                raise  # the module exists but imports something missing: a real error
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                raise ValueError(
                    f"code:{dotted}: {module_name} has no attribute path {'.'.join(parts[cut:])}"
                )
            target = getattr(target, attribute)
        return target
    raise ValueError(f"code:{dotted}: no importable module at the start of {dotted!r}")


def to_notebook(item: Lesson):
    """The lesson as an `nbformat.NotebookNode`: Markdown cells and code cells, kernel python3."""
    import jupytext

    notebook = jupytext.reads(item.text, fmt="md")
    notebook.metadata["kernelspec"] = dict(KERNELSPEC)
    notebook.metadata["language_info"] = {"name": "python"}
    notebook.metadata.pop("jupytext", None)  # the file is a plain notebook once exported
    return notebook


def export(directory: str | Path) -> list[Path]:
    """Write every lesson as ``NN-slug.ipynb`` into ``directory`` (made if missing), each
    file atomically. Other files there are left alone. -> the paths written."""
    import nbformat

    directory = Path(directory)
    written = []
    for item in lessons():
        path = directory / f"{item.name}.ipynb"
        write_text_atomic(path, nbformat.writes(to_notebook(item)))
        written.append(path)
    return written
