"""Where Glassformer keeps what it fetches: corpora, token caches, reference vocabularies.

$GLASSFORMER_DATA, else $XDG_CACHE_HOME/glassformer, else ~/.cache/glassformer
"""

from __future__ import annotations

import os
from pathlib import Path


def default_data_dir() -> Path:
    """$GLASSFORMER_DATA, else $XDG_CACHE_HOME/glassformer, else ~/.cache/glassformer."""
    if os.environ.get("GLASSFORMER_DATA"):
        return Path(os.environ["GLASSFORMER_DATA"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "glassformer"
