"""The routes that tell what a model made of a text, each one piece of the library's work:

    POST /api/tokens       {model, text} -> how the tokenizer cut the text (`tokenization.py`)
    POST /api/similarity   {model, text, other} -> a sentence encoder's cosine of the two texts'
                           sentence vectors, and the vectors (`similarity.py`)
    POST /api/explain      {model, text, method, target?, keep_first?, samples?} -> one attribution per
                           token (`explanations.py`: LIME, SHAP, IG, occlusion, gradient x input)
    POST /api/attention_change {model, base, text, layer?, head?} -> each head's attention in
                           ``base`` (pretrained) and ``model`` (its fine-tuned copy), and
                           how far it moved (`attention_change.py`)

Each reads a model that reads text, its texts within the route's limit (`Workshop.reader`),
and runs on the model thread once for every page that asks the same (`Workshop.shared`,
`shared_work.py`).
"""

from __future__ import annotations

import functools

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from glassformer.workshop.door.http import read_request
from glassformer.workshop.door.request_types import (
    AttentionChangeRequest,
    ExplainRequest,
    SimilarityRequest,
    TokensRequest,
)
from glassformer.workshop.model_work import Workshop
from glassformer.workshop.reading.attention_change import change as attention_change
from glassformer.workshop.reading.explanations import explain as explain_prediction
from glassformer.workshop.reading.similarity import similarity
from glassformer.workshop.reading.tokenization import explain as explain_tokens


def reading_routes(workshop: Workshop) -> list[Route]:
    """The routes above, on ``workshop``'s models."""

    async def tokens(request: Request) -> Response:
        body = await read_request(request, TokensRequest)
        lm = workshop.reader(body.model, "tokens", body.text)
        return await workshop.shared(request, "tokens", body, explain_tokens, lm, body.text)

    async def sentence_similarity(request: Request) -> Response:
        body = await read_request(request, SimilarityRequest)
        lm = workshop.reader(body.model, "similarity", body.text, body.other)
        return await workshop.shared(request, "similarity", body, similarity, lm, body.text, body.other)

    async def explain(request: Request) -> Response:
        body = await read_request(request, ExplainRequest)
        lm = workshop.reader(body.model, "explain", body.text)
        explain_one = functools.partial(explain_prediction, keep_first=body.keep_first, samples=body.samples)
        return await workshop.shared(
            request, "explain", body, explain_one, lm, body.text, body.method, body.target
        )

    async def attention_changed(request: Request) -> Response:
        body = await read_request(request, AttentionChangeRequest)
        after = workshop.reader(body.model, "attention_change", body.text)
        before = workshop.model(body.base)
        args = (before, after, body.text, body.layer, body.head)
        return await workshop.shared(request, "attention_change", body, attention_change, *args)

    return [
        Route("/api/tokens", tokens, methods=["POST"]),
        Route("/api/similarity", sentence_similarity, methods=["POST"]),
        Route("/api/explain", explain, methods=["POST"]),
        Route("/api/attention_change", attention_changed, methods=["POST"]),
    ]
