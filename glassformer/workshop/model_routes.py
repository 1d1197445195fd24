"""The routes about the models themselves, not one pass of them:

GET  /api/models       the models this server holds (name, architecture, stages, limits) and the
                       library's sampling defaults (`sampling.SAMPLING_DEFAULTS`), and whether
                       a class runs here (`class`: true or false)
GET  /api/costs        ?model=&seq_len=&batch=&dtype= -> what the model costs: parameters
                       by component, FLOPs per token, KV cache and training activation
                       memory (`glassformer.inspect.cost_report.costs`)
GET  /api/samples      ?model= -> the held-out digits a vision model can read, for the page's
                       picker: {count, images (packed n C H W), labels, source} (`images.py`)
GET  /api/quantization ?model=[&matrix=[&row=&block=]] -> a model quantized as it was loaded
                       (``--quantize``): its kind, bytes and each matrix's errors
                       (`model_quantization.model_summary`); with ``matrix`` (``blocks.3.ffn.up_proj``), that
                       matrix's errors block by block, its worst blocks and a window of its
                       weights (`model_quantization.matrix_view`, bounded whatever its size)
POST /api/lab/open     {run} -> {model: "runs/NAME"}: a run under the lab's runs root, loaded
                       as one more model (its latest checkpoint), to walk or compare
GET  /api/queue        {ahead, queued}: how many requests go before this page's next turn of the
                       model (`door/fair_queue.py`), and how many wait in all; a waiting page says so
"""

from __future__ import annotations

import functools

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from glassformer.inspect.cost_report import costs
from glassformer.loading import load
from glassformer.sampling import SAMPLING_DEFAULTS
from glassformer.workshop.door.budget import watch
from glassformer.workshop.door.fair_queue import client_of
from glassformer.workshop.door.http import RequestError, answer, read_query, read_request
from glassformer.workshop.door.request_types import (
    CostsQuery,
    NoQuery,
    QuantizationQuery,
    RunRequest,
    SamplesQuery,
)
from glassformer.workshop.model_quantization import matrix_view, model_summary
from glassformer.workshop.model_work import Workshop
from glassformer.workshop.reading.attention_change import origin
from glassformer.workshop.walk.architecture import model_entry
from glassformer.workshop.walk.images import samples as held_out_samples


def model_routes(workshop: Workshop) -> list[Route]:
    """The routes above, on ``workshop``'s models (a run opened joins them)."""
    models, origins = workshop.models, workshop.origins

    async def list_models(request: Request) -> JSONResponse:
        quantized = workshop.quantized
        described = [
            model_entry(name, lm, origins.get(name), quantized.get(name)) for name, lm in models.items()
        ]
        # never the token (`teach.py` shows it to a person); the library's sampling defaults for the form;
        # whether a class runs here (`classroom/`: the page then asks for its state)
        classroom = getattr(request.app.state, "classroom", None) is not None
        return JSONResponse({"models": described, "sampling": dict(SAMPLING_DEFAULTS), "class": classroom})

    async def model_costs(request: Request) -> JSONResponse:
        query = read_query(request, CostsQuery)
        lm = workshop.model(query.model)
        seq_len = query.seq_len or lm.config.max_seq_len
        figures = functools.partial(
            costs,
            lm.config,
            seq_len=seq_len,
            batch=query.batch,
            dtype=query.dtype,
            real_parameters=lm.net.num_parameters(),
        )
        return await answer(anyio.to_thread.run_sync(lambda: figures().to_dict()))

    async def samples(request: Request) -> JSONResponse:
        query = read_query(request, SamplesQuery)
        config = workshop.model(query.model).config
        return await answer(anyio.to_thread.run_sync(held_out_samples, config))  # read once, then cached

    async def quantization(request: Request) -> JSONResponse:
        """A quantized model's numbers, or one matrix's view (`model_quantization.py`)."""
        query = read_query(request, QuantizationQuery)
        lm = workshop.model(query.model)
        facts = workshop.quantized.get(query.model)
        if facts is None:
            raise RequestError(
                f"the model {query.model!r} is not quantized here: its weights are its own float32 ones "
                "(start the workshop with --quantize q8_0, q4_0 or q4_1 to see a quantized model's errors)"
            )
        if query.matrix is None:
            if query.row is not None or query.block is not None:
                raise RequestError("row and block choose a window of one matrix: name the matrix too")
            return JSONResponse(model_summary(facts))
        if (query.row is None) != (query.block is None):
            raise RequestError(
                "give both row and block (the window's block), or neither (the largest error's)"
            )
        view = functools.partial(matrix_view, facts, lm.net, query.matrix, query.row, query.block)
        return await answer(anyio.to_thread.run_sync(view))

    async def open_run(request: Request) -> JSONResponse:
        """A run of the lab's runs root, loaded as one more model (by name: never a path)."""
        body = await read_request(request, RunRequest)
        try:
            directory = workshop.lab.run_dir(body.run)
        except ValueError as error:
            raise RequestError(str(error)) from None
        name = f"runs/{directory.name}"
        work = workshop.run_model(request, "open", load, directory)  # its latest checkpoint
        lm = await answer(work, lambda lm: lm)
        watch(lm.net)
        models[name] = lm
        if origin(directory) in models:
            origins[name] = origin(directory)
        return JSONResponse({"model": name})

    async def queue(request: Request) -> JSONResponse:
        read_query(request, NoQuery)
        ahead = workshop.queue.ahead(client_of(request))
        return JSONResponse({"ahead": ahead, "queued": workshop.queue.queued})

    return [
        Route("/api/models", list_models),
        Route("/api/costs", model_costs),
        Route("/api/samples", samples),
        Route("/api/quantization", quantization),
        Route("/api/lab/open", open_run, methods=["POST"]),
        Route("/api/queue", queue),
    ]
