"""Generation streamed to the page as server-sent events, one event per new token.

    event: token    data: {"id": 7042, "text": " Paris", "step": 0, "seconds": 0.21,
                           "step_seconds": 0.21, "kv": {"new": 6, "reused": 0, "bytes": 55296}}
    event: stopped  data: {"reason": "this generation took longer than 60 s, ..."}   (the server's
                           time budget ended it; the tokens sent stand)
    event: done     data: {"tokens": 12, "seconds": 0.9, "tokens_per_s": 13.3, "text": " Paris...",
                           "prefill_seconds": 0.21, "decode_tokens_per_s": 15.1, "kv_bytes_per_token": 9216}

The tokens are `glassformer.generate.stream_ids`'s (the KV cache, the same sampling as
``lm.generate`` with the same settings and seed); their text comes from
`glassformer.lm.decode_pieces`, as ``lm.stream``'s does, so a character split over several
byte-level tokens arrives whole and a stop token shows no text.

Each step's ``kv`` is read from the forward pass that chose the token: a hook on the first
(decoder) layer's queries and keys sees how many positions the pass computed (``new``: the
whole prompt at the first step, the prefill; one token at each later step) and how many
keys attention read (new + ``reused``, the rows the cache kept). ``bytes``: what those rows
hold in the cache, ``KVCache.bytes_per_token`` each. A model without a cache (a window that
slides) shows every row new at every step. When the page stops reading (it closed, or asked
for something else), no more tokens are made.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from glassformer.generate import stream_ids
from glassformer.lm import decode_pieces
from glassformer.nn.hooks import hook_name
from glassformer.nn.kv_cache import KVCache
from glassformer.sampling import GenerationSettings


def token_events(lm, text: str, settings: GenerationSettings) -> Iterator[str]:
    """The server-sent events of generating from ``text`` (see the module docstring)."""
    prompt = lm.inputs.prompts(text)
    stops = lm.inputs.stop_ids(settings.stop_token_ids)
    per_token = KVCache.bytes_per_token(lm.config, next(lm.net.parameters()).dtype)
    rows: dict[str, int] = {}  # "q", "k": positions of the latest pass

    def count(x, name: str) -> None:  # b h t e (q), b g s e (k)
        rows[name.rsplit(".", 1)[1]] = x.shape[2]

    stack = "decoder" if lm.config.seq2seq else ""
    hooks = dict.fromkeys((hook_name("attn.q", 0, stack), hook_name("attn.k", 0, stack)), count)
    start = last = time.perf_counter()
    n, text_shown, prefill = 0, "", 0.0
    with lm.net.hooks(hooks):
        pieces = decode_pieces(lm.tokenizer, stream_ids(lm.net, prompt, settings), stops)
        for n, (token, piece) in enumerate(pieces, start=1):
            now = time.perf_counter()
            prefill = prefill or now - start
            kv = {"new": rows["q"], "reused": rows["k"] - rows["q"], "bytes": rows["k"] * per_token}
            text_shown += piece
            data = {"id": token, "text": piece, "step": n - 1, "seconds": now - start}
            yield _event("token", {**data, "step_seconds": now - last, "kv": kv})
            last = now
    seconds = time.perf_counter() - start
    decode = last - start - prefill  # the steps after the first
    yield _event(
        "done",
        {
            "tokens": n,
            "seconds": seconds,
            "tokens_per_s": n / seconds if seconds else 0.0,
            "text": text_shown,
            "prefill_seconds": prefill,
            "decode_tokens_per_s": (n - 1) / decode if n > 1 and decode > 0 else None,
            "kv_bytes_per_token": per_token,
        },
    )


def stopped_event(reason: str) -> str:
    """The event that ends a stream the server stopped (its time budget, the server stopping)."""
    return _event("stopped", {"reason": reason})


def _event(name: str, data: dict) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"
