"""The recipes of docs/architecture.md name files that exist: a newcomer following one finds
every file it names (a renamed or moved module fails here until the recipe follows it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def recipes() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("## Recipes")
    return text[start : text.index("\n## ", start + 1)]


def test_every_file_a_recipe_names_exists():
    named = set(re.findall(r"`((?:glassformer|tests)/[\w/.<>-]+)`", recipes()))
    assert len(named) > 30  # the parse sees the paths at all
    missing = sorted(path for path in named if "<" not in path and not (ROOT / path).exists())
    assert missing == [], f"docs/architecture.md's recipes name files that do not exist: {missing}"
    folders = sorted(path for path in named if "<" in path and not (ROOT / path.rsplit("/", 1)[0]).is_dir())
    assert folders == [], f"recipes name a file in folders that do not exist: {folders}"
