"""The workshop's web server: a Starlette app, a plain list of routes to plain functions.

    GET  /                 the page (static/index.html)
    GET  /static/...       its ES modules and styles
    GET  /api/models       the models this server holds (name, architecture, stages, limits) and the
                           library's sampling defaults (`sampling.SAMPLING_DEFAULTS`)
    GET  /teach            ?<the page's settings> -> a page with the link that opens this walk in
                           teaching mode in a class's fresh browsers (token included); answered
                           only to a top-level navigation, never to a script (`teach.py`)
    POST /api/walk         {model, text, decoder_text?, generated?: [id], temperature?,
                           top_k?, top_p?, repetition_penalty?, seed?,
                           interventions?: [{layer, head, mode, factor?}], patch_text?}
                           -> the walk payload (`payload.walk`); a vision model's pass reads
                           pixels or a held-out sample in place of text (`images.py`)
    POST /api/stage        {model, text, name, decoder_text?, generated?, interventions?,
                           patch_text?} -> one stage's whole tensor (`payload.stage`)
    POST /api/lens         {model, text, decoder_text?, generated?, interventions?, patch_text?}
                           -> what each layer would predict at the last position (`lens.py`)
    POST /api/tokens       {model, text} -> how the tokenizer cut the text (`tokenization.py`)
    POST /api/similarity   {model, text, other} -> a sentence encoder's cosine of the two texts'
                           sentence vectors, and the vectors (`similarity.py`)
    POST /api/explain      {model, text, method, target?, keep_first?, samples?} -> one attribution per
                           token (`explanations.py`: LIME, SHAP, IG, occlusion, gradient x input)
    POST /api/generate     {model, text, max_new_tokens?, sampling fields} -> server-sent
                           events, one per new token (`streaming.py`)
    POST /api/attention_change {model, base, text, layer?, head?} -> each head's attention in
                           ``base`` (pretrained) and ``model`` (its fine-tuned copy), and
                           how far it moved (`attention_change.py`)
    GET  /api/samples      ?model= -> the held-out digits a vision model can read, for the page's
                           picker: {count, images (packed n C H W), labels, source} (`images.py`)
    GET  /api/costs        ?model=&seq_len=&batch=&dtype= -> what the model costs: parameters
                           by component, FLOPs per token, KV cache and training activation
                           memory (`glassformer.inspect.cost_report.costs`)
    GET  /views/{view}     ?model=&text=&layer=&head= -> a notebook view's HTML (`views.py`)
    /lab, /api/lab/...     the training lab (`lab_routes.py`, `lab.py`)
    /lessons, /api/lessons/... the course's lessons, run on this machine (`lesson_routes.py`)
    POST /api/lab/open     {run} -> {model: "runs/NAME"}: a run under the lab's runs root, loaded
                           as one more model (its latest checkpoint), to walk or compare

Only the workshop's own page, or a script with its token, gets through (`guard.py`: the
Host, the origin, the token, JSON bodies). Every body is a typed request (`request_types.py`)
read and validated in one place (`http.read_request`); a bad one is answered 400 (404 for
an unknown model, 413 for a body or an input past its limit, 415 for a body that is not
JSON) with ``{"error": message}``, which the page shows.

Models are the ones the command line named, loaded once at start; the browser picks one
by name and can never make the server read a path. Forward passes run one at a time (one
lock), off the event loop, always on the same worker thread: torch's CPU thread pool
belongs to the thread that calls it, so moving between threads would start new pools that
compete for the cores (streaming ran ~15% slower that way). Each runs within its route's
work limits (`limits.py`: tokens by the model's sizes, seconds) and stops when its page
leaves or the server stops (`budget.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from glassformer.inspect.cost_report import costs
from glassformer.loading import load
from glassformer.sampling import SAMPLING_DEFAULTS, generation_settings
from glassformer.workshop import payload
from glassformer.workshop.architecture import model_entry
from glassformer.workshop.attention_change import change as attention_change
from glassformer.workshop.attention_change import origin
from glassformer.workshop.budget import CLIENT_GONE, WorkBudget, WorkStopped, watch, when_gone
from glassformer.workshop.explanations import explain as explain_prediction
from glassformer.workshop.guard import LOOPBACK, Guard, Logins, new_token
from glassformer.workshop.http import RequestError, answer, read_query, read_request, request_error
from glassformer.workshop.images import samples as held_out_samples
from glassformer.workshop.lab import Lab
from glassformer.workshop.lab_routes import lab_routes
from glassformer.workshop.lens import lens as lens_payload
from glassformer.workshop.lesson_routes import lesson_routes
from glassformer.workshop.limits import SECONDS, check_length
from glassformer.workshop.module_graph import with_preloads
from glassformer.workshop.pass_input import PassInput, read_pass
from glassformer.workshop.request_types import (
    AttentionChangeRequest,
    CostsQuery,
    ExplainRequest,
    GenerateRequest,
    PassRequest,
    RunRequest,
    SamplesQuery,
    Sampling,
    SimilarityRequest,
    StageRequest,
    TokensRequest,
    ViewQuery,
    WalkRequest,
)
from glassformer.workshop.similarity import similarity
from glassformer.workshop.streaming import stopped_event, token_events
from glassformer.workshop.teach import teach_page
from glassformer.workshop.tokenization import explain as explain_tokens
from glassformer.workshop.views import policy, view_html

STATIC = Path(__file__).parent / "static"
VIZ_ASSETS = Path(__file__).resolve().parents[1] / "viz" / "assets"  # served at static/viz/


def create_app(
    models: dict[str, Any],
    runs_root: str | Path = "runs",
    origins: dict[str, str] | None = None,
    *,
    token: str | None = None,
    hosts: Iterable[str] | None = LOOPBACK,
) -> Starlette:
    """The app serving ``models`` ({name: LanguageModel}); its training lab keeps its runs
    under ``runs_root``. ``origins``: {fine-tuned model: the model it was fine-tuned from},
    both names of ``models`` (the page offers the pair to compare their attention).
    ``token``: the secret a page or script must show (`guard.py`; None: a new one, read back
    as ``app.state.token``); ``hosts``: the Host names answered (None: any, the token alone)."""
    if not models:
        raise ValueError("the workshop needs at least one model")
    origins = dict(origins or {})
    token = new_token() if token is None else token
    lab = Lab(runs_root)
    lock = asyncio.Lock()
    running: set[WorkBudget] = set()  # the model work in flight (one runs, the rest wait)
    stopping = threading.Event()  # set by `stop_work`: the server is going down
    model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="glassformer-model")
    for lm in models.values():
        watch(lm.net)

    async def on_model_thread(fn, *args):
        return await asyncio.get_running_loop().run_in_executor(model_thread, fn, *args)

    async def run_model(request: Request, route: str, fn, *args):
        """``fn(*args)`` on the model thread, one at a time, within the route's time budget and
        stopped when the page that asked leaves (`budget.py`)."""
        budget = WorkBudget(f"this {route.replace('_', ' ')}", SECONDS[route])
        if stopping.is_set():
            budget.cancel("the server is stopping")
        running.add(budget)
        gone = functools.partial(budget.cancel, "the page that asked for it left", CLIENT_GONE)
        watcher = asyncio.create_task(when_gone(request, gone))
        try:
            async with lock:
                return await on_model_thread(budget.run, fn, *args)
        except asyncio.CancelledError:  # the server is stopping: the model thread must stop too
            budget.cancel("the server is stopping")
            raise
        except WorkStopped as stopped:
            raise RequestError(str(stopped), stopped.status) from None
        finally:
            watcher.cancel()
            running.discard(budget)

    def stop_work(reason: str = "the server is stopping") -> None:
        """Stop the work in flight and the streams now (503s and closed streams, not a
        wait): the command calls it on Ctrl-C, before uvicorn waits for requests to end."""
        stopping.set()
        for budget in list(running):
            budget.cancel(reason)

    page = with_preloads(STATIC / "index.html", {"": STATIC, "viz/": VIZ_ASSETS}, "js/main.js")  # read once

    async def index(request: Request) -> HTMLResponse:
        return HTMLResponse(page)

    async def list_models(request: Request) -> JSONResponse:
        described = [model_entry(name, lm, origins.get(name)) for name, lm in models.items()]
        # never the token (`teach.py` shows it to a person); the library's sampling defaults for the form
        return JSONResponse({"models": described, "sampling": dict(SAMPLING_DEFAULTS)})

    async def open_run(request: Request) -> JSONResponse:
        """A run of the lab's runs root, loaded as one more model (by name: never a path)."""
        body = await read_request(request, RunRequest)
        try:
            directory = lab.run_dir(body.run)
        except ValueError as error:
            raise RequestError(str(error)) from None
        name = f"runs/{directory.name}"
        lm = await answer(run_model(request, "open", load, directory), lambda lm: lm)  # its latest checkpoint
        watch(lm.net)
        models[name] = lm
        if origin(directory) in models:
            origins[name] = origin(directory)
        return JSONResponse({"model": name})

    async def walk(request: Request) -> JSONResponse:
        body = await read_request(request, WalkRequest)
        given = _pass_input(models, body, "walk")
        return await answer(run_model(request, "walk", payload.walk, given, _settings(body), body.model))

    async def stage(request: Request) -> JSONResponse:
        body = await read_request(request, StageRequest)
        given = _pass_input(models, body, "stage")
        return await answer(run_model(request, "stage", payload.stage, given, body.name))

    async def lens(request: Request) -> JSONResponse:
        body = await read_request(request, PassRequest)
        lm = _model(models, body.model)
        if not lm.config.has_lm_head:
            raise RequestError(
                "a sentence encoder or a classifier has no head to read its layers with: no logit lens"
            )
        return await answer(run_model(request, "lens", lens_payload, _pass_input(models, body, "lens")))

    async def explain(request: Request) -> JSONResponse:
        body = await read_request(request, ExplainRequest)
        lm = _reader(models, body.model, "explain", body.text)
        explain_one = functools.partial(explain_prediction, keep_first=body.keep_first, samples=body.samples)
        work = run_model(request, "explain", explain_one, lm, body.text, body.method, body.target)
        return await answer(work)

    async def attention_changed(request: Request) -> JSONResponse:
        body = await read_request(request, AttentionChangeRequest)
        after = _reader(models, body.model, "attention_change", body.text)
        before = _model(models, body.base)
        work = run_model(
            request, "attention_change", attention_change, before, after, body.text, body.layer, body.head
        )
        return await answer(work)

    async def tokens(request: Request) -> JSONResponse:
        body = await read_request(request, TokensRequest)
        lm = _reader(models, body.model, "tokens", body.text)
        return await answer(run_model(request, "tokens", explain_tokens, lm, body.text))

    async def sentence_similarity(request: Request) -> JSONResponse:
        body = await read_request(request, SimilarityRequest)
        lm = _reader(models, body.model, "similarity", body.text, body.other)
        return await answer(run_model(request, "similarity", similarity, lm, body.text, body.other))

    async def generate(request: Request) -> StreamingResponse:
        body = await read_request(request, GenerateRequest)
        lm = _reader(models, body.model, "generate", body.text, extra=body.max_new_tokens)
        if not lm.config.generates:
            raise RequestError(
                "an encoder does not generate text, nor does a classifier; "
                "choose a decoder or an encoder-decoder"
            )
        settings = _settings(body, max_new_tokens=body.max_new_tokens)
        try:
            lm.inputs.single(body.text)  # a prompt the model can read, checked before the stream starts
        except (ValueError, TypeError) as error:
            raise RequestError(str(error)) from error

        budget = WorkBudget("this generation", SECONDS["generate"])

        async def events():
            """One token per forward pass, the lock held for that pass only: another client's
            request goes between two tokens (the lock is first come, first served)."""
            tokens = token_events(lm, body.text, settings)
            running.add(budget)
            try:
                while not stopping.is_set():
                    async with lock:
                        event = await on_model_thread(budget.run, next, tokens, None)
                    if event is None:
                        break
                    yield event  # a client gone: the response stops asking, so no next token
            except WorkStopped as stopped:  # past its time: the page is told why it ended
                yield stopped_event(str(stopped))
            finally:  # also when the client left: shielded, it waits for a step in flight
                running.discard(budget)
                with anyio.CancelScope(shield=True):
                    async with lock:
                        await on_model_thread(tokens.close)  # its hooks come off the model now

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    async def model_costs(request: Request) -> JSONResponse:
        query = read_query(request, CostsQuery)
        lm = _model(models, query.model)
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
        config = _model(models, query.model).config
        return await answer(anyio.to_thread.run_sync(held_out_samples, config))  # read once, then cached

    async def view(request: Request) -> HTMLResponse:
        query = read_query(request, ViewQuery)
        lm = _reader(models, query.model, "views", query.text)
        kind = request.path_params["view"]
        work = run_model(request, "views", view_html, lm, kind, query.text, query.layer, query.head)
        return await answer(
            work, lambda page: HTMLResponse(page, headers={"Content-Security-Policy": policy(page)})
        )

    routes = [
        Route("/", index),
        Route("/api/models", list_models),
        Route("/teach", lambda request: teach_page(request, token)),
        Route("/api/walk", walk, methods=["POST"]),
        Route("/api/stage", stage, methods=["POST"]),
        Route("/api/lens", lens, methods=["POST"]),
        Route("/api/tokens", tokens, methods=["POST"]),
        Route("/api/similarity", sentence_similarity, methods=["POST"]),
        Route("/api/explain", explain, methods=["POST"]),
        Route("/api/generate", generate, methods=["POST"]),
        Route("/api/attention_change", attention_changed, methods=["POST"]),
        Route("/api/costs", model_costs),
        Route("/api/samples", samples),
        Route("/api/lab/open", open_run, methods=["POST"]),
        Route("/views/{view}", view),
        Route("/favicon.ico", lambda request: Response(status_code=204)),  # the views ask for one
        *lab_routes(lab, STATIC / "lab.html", stopping),
        *lesson_routes(models, STATIC / "lessons.html"),
        Mount(
            "/static/viz", StaticFiles(directory=VIZ_ASSETS), name="viz"
        ),  # the modules shared with the views
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        await anyio.to_thread.run_sync(lab.shutdown)  # a run still going keeps its checkpoint

    logins = Logins()
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Guard, token=token, hosts=hosts, logins=logins)],
        exception_handlers={RequestError: request_error},
        lifespan=lifespan,
    )
    app.state.token = token
    app.state.login_link = logins.new  # a one-time code for the link the command prints
    app.state.stop_work = stop_work
    return app


def _model(models: dict[str, Any], name: str) -> Any:
    if name not in models:
        raise RequestError(f"no model {name!r} here; this workshop holds: {', '.join(models)}", status=404)
    return models[name]


def _reader(models: dict[str, Any], name: str, route: str, *texts: str | None, extra: int = 0) -> Any:
    """The model ``name``, checked to read ``texts`` within ``route``'s work limit (413 past it)."""
    lm = _readable(_model(models, name))
    check_length(lm, name, route, *texts, extra=extra)
    return lm


def _readable(lm) -> Any:
    """``lm``, if it can read text."""
    if lm.config.vision:
        raise RequestError(
            "this is a vision model (ViT): it reads images, not text; walk it with an image "
            "(pixels, or a held-out sample)"
        )
    if lm.tokenizer is None:
        raise RequestError("this model has no tokenizer, so it cannot read text")
    return lm


def _pass_input(models: dict[str, Any], body: PassRequest, route: str) -> PassInput:
    """The forward pass of a walk, stage or lens request, checked against the model and the
    route's work limit (`pass_input.read_pass`)."""
    lm = _model(models, body.model)
    return read_pass(lm if lm.config.vision else _readable(lm), body, route)


def _settings(body: Sampling, max_new_tokens: int = 1):
    """GenerationSettings from the request's sampling fields (absent or null: not set)."""
    try:
        return generation_settings(max_new_tokens=max_new_tokens, **body.sampling())
    except ValueError as error:
        raise RequestError(str(error)) from None
