"""How the text became tokens: the tokenizer's own account, for the tokens panel.

`explain(lm, text)` asks the model's tokenizer (`Tokenizer.explain`, with the special-token
rule the model's inputs use) how it cut the text: one entry per piece with the text it
covers, the steps that made its tokens and their ids. The steps differ by kind:

    bpe         the pre-token's bytes, then each merge (the pair, its rank) -> the parts
    sentencepiece_bpe   the same over characters ("▁" a space, <0xE4> a byte-fallback token)
    unigram     the lattice: every vocabulary piece that matches at each position with its
                log-probability ("best": on the best path), the best path's total "score"
    wordpiece   the word normalized, then the longest vocabulary pieces (or [UNK], and why)
    char        one character per token (its code point and name), or a special token

    {"kind": "bpe", "pieces": [{"text", "start", "end", "ids", "tokens", "steps", ...}],
     "ids": [...]}        ids: every piece's ids in order, the walk's tokens

Nothing here runs the model; the answer is small beside the walk (one entry per piece).
"""

from __future__ import annotations

from typing import Any

MAX_PIECES = 2048  # a longer text is explained up to here, and the answer says so


def explain(lm, text: str) -> dict[str, Any]:
    """The tokenizer's account of ``text`` (see the module docstring)."""
    tokenizer = lm.tokenizer
    pieces = tokenizer.explain(text, allowed_special="all")
    label = lm.inputs.labels
    for piece in pieces:
        piece["tokens"] = label(piece["ids"])
    ids = [i for piece in pieces for i in piece["ids"]]
    return {
        "kind": tokenizer.kind,
        "pieces": pieces[:MAX_PIECES],
        "cut": len(pieces) > MAX_PIECES,
        "ids": ids,
    }
