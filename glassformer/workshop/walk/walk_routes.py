"""The walk's routes: one forward pass as the page draws it (`payload.py`, `lens.py`):

    POST /api/walk         {model, text, decoder_text?, generated?: [id], temperature?,
                           top_k?, top_p?, repetition_penalty?, seed?,
                           interventions?: [{layer, head, mode, factor?}], patch_text?}
                           -> the walk payload (`payload.walk`); a vision model's pass reads
                           pixels or a held-out sample in place of text (`images.py`)
    POST /api/stage        {model, text, name, decoder_text?, generated?, interventions?,
                           patch_text?, exact?} -> one stage's whole tensor (`payload.stage`;
                           ``exact``: attention weights as float32, not bytes)
    POST /api/lens         {model, text, decoder_text?, generated?, interventions?, patch_text?}
                           -> what each layer would predict at the last position (`lens.py`)

Each reads its pass with `Workshop.pass_input` (`pass_input.read_pass`) and runs it on the
model thread within its route's limits, once for every page that asks the same
(`Workshop.shared`, `shared_work.py`); walks of one model waiting at once run in one pass
(`batched_walk.py`).
"""

from __future__ import annotations

import functools

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from glassformer.workshop.door.http import RequestError, read_request
from glassformer.workshop.door.request_types import PassRequest, StageRequest, WalkRequest
from glassformer.workshop.model_work import Together, Workshop, settings
from glassformer.workshop.walk import batched_walk, payload
from glassformer.workshop.walk.lens import lens as lens_payload


def walk_routes(workshop: Workshop) -> list[Route]:
    """The routes above, on ``workshop``'s models."""

    async def walk(request: Request) -> Response:
        body = await read_request(request, WalkRequest)
        given = workshop.pass_input(body, "walk")
        if given.lm.config.has_lm_head:  # the class's lens, asked before its walk lands (`Workshop.prepare`)
            asked = PassRequest.model_validate(body.model_dump(include=set(PassRequest.model_fields)))
            read = functools.partial(workshop.pass_input, asked, "lens")  # tokenized only if prepared
            workshop.prepare(request, "lens", asked, lens_payload, read)
        key = batched_walk.batch_key(given)  # walks of one model waiting together: one pass
        together = None if key is None else Together(key, batched_walk.walks, batched_walk.BATCH_LIMIT)
        args = (given, settings(body), body.model)
        return await workshop.shared(request, "walk", body, payload.walk, *args, together=together)

    async def stage(request: Request) -> Response:
        body = await read_request(request, StageRequest)
        given = workshop.pass_input(body, "stage")
        return await workshop.shared(request, "stage", body, payload.stage, given, body.name, body.exact)

    async def lens(request: Request) -> Response:
        body = await read_request(request, PassRequest)
        lm = workshop.model(body.model)
        if not lm.config.has_lm_head:
            raise RequestError(
                "a sentence encoder or a classifier has no head to read its layers with: no logit lens"
            )
        given = workshop.pass_input(body, "lens")
        return await workshop.shared(request, "lens", body, lens_payload, given)

    return [
        Route("/api/walk", walk, methods=["POST"]),
        Route("/api/stage", stage, methods=["POST"]),
        Route("/api/lens", lens, methods=["POST"]),
    ]
