"""Generation's route: new tokens streamed as the model makes them (`streaming.py`):

    POST /api/generate     {model, text, max_new_tokens?, temperature?, top_k?, top_p?,
                           repetition_penalty?, seed?} -> server-sent events, one per new token

The prompt is checked (its length within the route's limit, a model that generates, a text
it can read) before the stream starts; after that a problem ends the stream with an event
saying why (`streaming.stopped_event`).
"""

from __future__ import annotations

import anyio
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from glassformer.workshop.door.budget import WorkBudget, WorkStopped
from glassformer.workshop.door.fair_queue import client_of
from glassformer.workshop.door.http import RequestError, read_request
from glassformer.workshop.door.limits import SECONDS
from glassformer.workshop.door.request_types import GenerateRequest
from glassformer.workshop.model_work import Workshop, settings
from glassformer.workshop.reading.streaming import stopped_event, token_events


def generate_routes(workshop: Workshop) -> list[Route]:
    """The route above, on ``workshop``'s models; a stream ends when the server stops."""

    async def generate(request: Request) -> StreamingResponse:
        body = await read_request(request, GenerateRequest)
        lm = workshop.reader(body.model, "generate", body.text, extra=body.max_new_tokens)
        if not lm.config.generates:
            raise RequestError(
                "an encoder does not generate text, nor does a classifier; "
                "choose a decoder or an encoder-decoder"
            )
        chosen = settings(body, max_new_tokens=body.max_new_tokens)
        try:
            lm.inputs.single(body.text)  # a prompt the model can read, checked before the stream starts
        except (ValueError, TypeError) as error:
            raise RequestError(str(error)) from error

        budget = WorkBudget("this generation", SECONDS["generate"])
        client = client_of(request)

        async def events():
            """One token per forward pass, the model held for that pass only: another client's
            request goes between two tokens (`fair_queue.py`: each step waits in the client's lane)."""
            tokens = token_events(lm, body.text, chosen)
            workshop.running.add(budget)
            try:
                while not workshop.stopping.is_set():
                    async with workshop.queue.turn(client, stream=True):
                        event = await workshop.on_model_thread(budget.run, next, tokens, None)
                    if event is None:
                        break
                    yield event  # a client gone: the response stops asking, so no next token
            except WorkStopped as stopped:  # past its time: the page is told why it ended
                yield stopped_event(str(stopped))
            finally:  # also when the client left: shielded, it waits for a step in flight
                workshop.running.discard(budget)
                with anyio.CancelScope(shield=True):
                    async with workshop.queue.turn(client, stream=True):
                        await workshop.on_model_thread(tokens.close)  # its hooks come off the model now

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    return [Route("/api/generate", generate, methods=["POST"])]
