"""Screenshots for a person to review, kept only when asked for.

Tests write under pytest's ``tmp_path`` and nowhere else. A browser test that takes a
screenshot worth a look passes it to `keep_screenshot`, which copies it to the folder
named by the environment variable ``GLASSFORMER_SCREENSHOTS`` (created if missing) when
that variable is set, and does nothing otherwise::

    GLASSFORMER_SCREENSHOTS=/tmp/viz-shots .venv/bin/pytest tests/test_viz_html.py
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ENV = "GLASSFORMER_SCREENSHOTS"


def keep_screenshot(path: Path, name: str | None = None) -> Path | None:
    """Copy the screenshot ``path`` into $GLASSFORMER_SCREENSHOTS as ``name`` (default: its
    own file name); the copy's path, or None when the variable is unset or empty."""
    folder = os.environ.get(ENV, "")
    if not folder:
        return None
    target = Path(folder).expanduser()
    target.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(path, target / (name or Path(path).name)))
