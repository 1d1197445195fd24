"""The course as lessons: Markdown files with runnable code, read, checked and exported here.

Each lesson is a file ``NN-slug.md`` of this package in jupytext's Markdown format: prose,
equations in KaTeX-compatible TeX, and ```python blocks that compute and ``assert`` every
claim. `lessons()` lists them, `lesson(key)` finds one by number or slug, `to_notebook`
turns one into a notebook and `export` writes them all as ``.ipynb`` files; `execute`
(in `glassformer.lessons.run`) runs one top to bottom, as the tests do.
"""

from glassformer.lessons.catalog import Lesson, export, lesson, lessons, links, resolve_code, to_notebook

__all__ = ["Lesson", "export", "lesson", "lessons", "links", "resolve_code", "to_notebook"]
