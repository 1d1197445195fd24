"""Generation streamed to the page as server-sent events, one event per new token.

    event: token    data: {"id": 7042, "text": " Paris", "step": 0, "seconds": 0.21}
    event: done     data: {"tokens": 12, "seconds": 0.9, "tokens_per_s": 13.3, "text": " Paris..."}

The tokens are `glassformer.generate.stream_ids`'s (the KV cache, the same sampling as
``lm.generate`` with the same settings and seed); their text comes from
`glassformer.lm.decode_pieces`, as ``lm.stream``'s does, so a character split over several
byte-level tokens arrives whole and a stop token shows no text. When
the page stops reading (it closed, or asked for something else), no more tokens are made.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from glassformer.generate import stream_ids
from glassformer.lm import decode_pieces
from glassformer.sampling import GenerationSettings


def token_events(lm, text: str, settings: GenerationSettings) -> Iterator[str]:
    """The server-sent events of generating from ``text`` (see the module docstring)."""
    prompt = lm.inputs.prompts(text)
    stops = lm.inputs.stop_ids(settings.stop_token_ids)
    start = time.perf_counter()
    pieces = decode_pieces(lm.tokenizer, stream_ids(lm.net, prompt, settings), stops)
    n, text_shown = 0, ""
    for n, (token, piece) in enumerate(pieces, start=1):
        text_shown += piece
        data = {"id": token, "text": piece, "step": n - 1, "seconds": time.perf_counter() - start}
        yield _event("token", data)
    seconds = time.perf_counter() - start
    done = {"tokens": n, "seconds": seconds, "tokens_per_s": n / seconds if seconds else 0.0}
    yield _event("done", {**done, "text": text_shown})


def _event(name: str, data: dict) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"
