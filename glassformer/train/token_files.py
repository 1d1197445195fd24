"""A corpus tokenized once into a file of ids, memory-mapped (nanoGPT's ``train.bin``).

`token_file` encodes a text once and caches the ids on disk, raw uint16 (or uint32 for a
vocabulary over 65,536), beside a JSON sidecar that says which text and which tokenizer
they came from; later runs map the file instead of encoding again. The batchers of
`glassformer.train.data` draw their windows from the mapped array.

>>> import tempfile
>>> from glassformer.tokenizers.char import CharTokenizer
>>> tokenizer = CharTokenizer.from_text("abc ")
>>> with tempfile.TemporaryDirectory() as folder:
...     ids = token_file("abc cab", tokenizer, Path(folder) / "tokens.bin")
...     ids.tolist(), ids.dtype
([1, 2, 3, 0, 3, 1, 2], dtype('uint16'))
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from glassformer.atomic import write_text_atomic
from glassformer.tokenizers.base import Tokenizer

TOKEN_FILE_FORMAT = "glassformer-tokens"
TOKEN_FILE_VERSION = 1
# A cut after a newline with a non-space character on both sides: no pre-tokenizer (GPT-2's,
# cl100k's) nor WordPiece's whitespace split joins tokens across it, so encoding chunk by chunk
# gives the ids of encoding the whole text. ("a  \nb" would not do: GPT-2's \s+(?!\S) reads
# the spaces differently at the end of a chunk.)
CHUNK_BOUNDARY = re.compile(r"(?<=\S)\n(?=\S)")


def token_file(text: str, tokenizer: Tokenizer, path: str | Path, chunk_chars: int = 1 << 20) -> np.memmap:
    """The ids of ``text``, encoded once and cached at ``path`` (raw uint16/uint32), memory-mapped.

    Beside ``path`` a sidecar ``path + ".json"`` records the dtype, the length and two sha256
    fingerprints: of the tokenizer (its ``to_dict`` as JSON) and of the text. The cache is used
    only when both match; otherwise the text is encoded again, in chunks of about
    ``chunk_chars`` characters (with a progress bar on a terminal). Both files are written
    atomically, the sidecar last, so a crash leaves the old cache or none, never half a file.

    Special-token text inside the corpus ("<|endoftext|>" in a web page) is encoded as ordinary
    text: every tokenizer gets ``disallowed_special="none"`` (by default it would raise), WordPiece
    also ``add_special_tokens=False`` (no [CLS]/[SEP] per chunk).
    """
    path = Path(path)
    if not text:
        raise ValueError(f"the text for {path.name} is empty: there is nothing to train on")
    dtype = np.dtype(np.uint16 if tokenizer.vocab_size <= 1 << 16 else np.uint32)
    meta = {
        "format": TOKEN_FILE_FORMAT,
        "version": TOKEN_FILE_VERSION,
        "dtype": dtype.name,
        "tokenizer_sha256": tokenizer_fingerprint(tokenizer),
        "text_sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
    }
    sidecar = _sidecar(path)
    cached = _read_meta(sidecar)
    if cached is not None and {k: cached.get(k) for k in meta} == meta and _size_matches(path, cached):
        return np.memmap(path, dtype=dtype, mode="r", shape=(cached["length"],))

    length = _encode_to_file(text, tokenizer, path, dtype, chunk_chars)
    write_text_atomic(sidecar, json.dumps({**meta, "length": length}, indent=1))
    return np.memmap(path, dtype=dtype, mode="r", shape=(length,))


def _encode_to_file(text: str, tokenizer: Tokenizer, path: Path, dtype: np.dtype, chunk_chars: int) -> int:
    """Encode ``text`` chunk by chunk into a temporary file, then rename it to ``path``
    (removing the old sidecar first); returns the number of ids written."""
    options = _plain_text_options(tokenizer)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    length = 0
    quiet = True if len(text) <= chunk_chars else None  # None: a bar on a terminal only
    bar = tqdm(total=len(text), unit="char", unit_scale=True, desc=f"tokenizing {path.name}", disable=quiet)
    try:
        with os.fdopen(fd, "wb") as handle, bar:
            for chunk in _chunks(text, chunk_chars):
                ids = np.asarray(tokenizer.encode(chunk, **options), dtype=dtype)
                handle.write(ids.tobytes())
                length += len(ids)
                bar.update(len(chunk))
            handle.flush()
            os.fsync(handle.fileno())
        if length == 0:
            raise ValueError(f"the text for {path.name} encodes to no tokens: there is nothing to train on")
        _sidecar(path).unlink(missing_ok=True)  # from here until the new sidecar, no cache is valid
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return length


def tokenizer_fingerprint(tokenizer: Tokenizer) -> str:
    """sha256 of the tokenizer's kind and ``to_dict()`` as canonical JSON: it changes whenever the
    vocabulary, the merges or a setting changes."""
    data = {"type": tokenizer.kind, **tokenizer.to_dict()}
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _plain_text_options(tokenizer: Tokenizer) -> dict[str, Any]:
    if tokenizer.kind == "wordpiece":
        return {"disallowed_special": "none", "add_special_tokens": False}
    if tokenizer.kind in ("bpe", "char"):
        return {"disallowed_special": "none"}
    return {}


def _chunks(text: str, chunk_chars: int):
    """Pieces of about ``chunk_chars`` characters, cut only at a `CHUNK_BOUNDARY`."""
    start = 0
    while start < len(text):
        match = CHUNK_BOUNDARY.search(text, start + max(1, chunk_chars))
        end = match.end() if match else len(text)
        yield text[start:end]
        start = end


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _read_meta(sidecar: Path) -> dict[str, Any] | None:
    try:
        return json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _size_matches(path: Path, meta: dict[str, Any]) -> bool:
    length = meta.get("length")
    if not isinstance(length, int) or length < 1 or not path.is_file():
        return False
    return path.stat().st_size == length * np.dtype(meta["dtype"]).itemsize
