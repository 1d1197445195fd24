"""How much work one request may ask of this machine: a token limit per route, from the model's
sizes, so that no single request takes more than `WORK_BYTES` beyond the loaded models.

What a forward pass the page reads costs grows with the input length t in two ways:

    attention   h · t² floats per layer while its block runs (scores, the mask applied, the
                weights, a head average: `ATTENTION_COPIES`), one layer at a time in a walk
    logits      t · v floats (every position's scores over the vocabulary, and a copy)

and a view keeps every layer's weights at once and writes each as text into its HTML
(`VIEW_BYTES_PER_WEIGHT`). A route's limit is the longest input whose estimate stays within
`WORK_BYTES`, and at most a fixed cap where more could not be read anyway (`CAPS`); the
model's own ``max_seq_len`` is checked by the model. `benchmarks/workshop_limits.py` runs the
largest request each route allows and prints its peak memory beside this estimate.
"""

from __future__ import annotations

import math

from glassformer.workshop.door.http import RequestError

WORK_BYTES = 1 << 30  # 1 GiB of activations per request: its peak stays under 2 GB above the models
RESPONSE_BYTES = 64 << 20  # the most one answer holds: it is built whole, and kept until its client reads it
FLOAT = 4
ATTENTION_COPIES = 6  # scores, bias / mask applied, softmax, its output for the hook, a head mean, slack
LOGIT_COPIES = 3  # the logits, their float copy, the softmax of the prediction's steps
VIEW_BYTES_PER_WEIGHT = 40  # the float, its Python float in the JSON list, its text in the page

# what each route computes: "pass" (one forward pass, the walk's), "all_layers" (every layer's
# weights at once: the notebook views, attention change), "explain" (hundreds of passes)
ROUTE_WORK = {
    "walk": "pass",
    "stage": "pass",
    "lens": "pass",
    "generate": "pass",
    "tokens": "tokenizer",
    "similarity": "pass",
    "views": "all_layers",
    "attention_change": "all_layers",
    "explain": "explain",
    "poll": "pass",  # the class's poll: one forward pass of the class's text
}
SECONDS = {  # the time one request may hold the model, past which it is stopped (503)
    "walk": 30.0,
    "stage": 30.0,
    "lens": 30.0,
    "generate": 60.0,  # a whole generation, its steps together (the lock is taken per step)
    "tokens": 10.0,
    "similarity": 30.0,
    "views": 30.0,
    "attention_change": 30.0,
    "explain": 30.0,
    "open": 60.0,  # loading a run's checkpoint
    "poll": 30.0,  # the class's poll: one forward pass (its reveal: one draw)
}
CAPS = {
    "pass": 4096,  # a walk of more cannot be read on a screen
    "all_layers": 256,  # a view of every head past this is a grey square
    "explain": 64,  # LIME / SHAP sample over subsets of the tokens: more is minutes
    "tokenizer": 8192,  # the tokenizer's account: one entry per piece, linear in the text
}


def max_tokens(config, route: str) -> int:
    """The longest input (in tokens) ``route`` takes for a model of ``config``."""
    work = ROUTE_WORK[route]
    cap = CAPS[work]
    heads, layers = config.n_heads, sum(config.stack_depths)
    if work == "pass":
        # ATTENTION_COPIES · h · t² + LOGIT_COPIES · v · t <= WORK_BYTES / FLOAT, solved for t
        a, b = ATTENTION_COPIES * heads, LOGIT_COPIES * config.vocab_size
        c = WORK_BYTES / FLOAT
        return min(cap, int((-b + math.sqrt(b * b + 4 * a * c)) / (2 * a)))
    if work == "all_layers":
        return min(cap, int(math.sqrt(WORK_BYTES / (VIEW_BYTES_PER_WEIGHT * layers * heads))))
    return cap


def check_response(what: str, elements: int, bytes_per_element: float) -> None:
    """A 413, before it is built, for an answer of ``elements`` values past `RESPONSE_BYTES`."""
    size = elements * bytes_per_element
    if size > RESPONSE_BYTES:
        raise RequestError(
            f"{what} would be {size / 2**20:,.0f} MiB to send; the workshop sends at most "
            f"{RESPONSE_BYTES / 2**20:,.0f} MiB in one answer: shorten the text",
            status=413,
        )


def check_length(lm, name: str, route: str, *texts: str | None, extra: int = 0) -> int:
    """The number of tokens of ``texts`` (plus ``extra`` appended ids), or a 413 that says the
    limit and why; texts a model without a tokenizer cannot read are left to the route."""
    if lm.tokenizer is None:
        return extra
    try:
        count = extra + sum(len(lm.tokenizer.encode(text, allowed_special="all")) for text in texts if text)
    except (ValueError, TypeError) as error:  # a character the tokenizer does not have
        raise RequestError(str(error)) from None
    limit = max_tokens(lm.config, route)
    if count > limit:
        raise RequestError(
            f"this input is {count:,} tokens; the workshop's {route} of {name} takes at most {limit:,} "
            "on this machine (its memory grows with the square of the length): shorten the text",
            status=413,
        )
    return count
