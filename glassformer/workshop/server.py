"""The workshop's web server: a Starlette app, a plain list of routes to plain functions.

    GET  /                 the page (static/index.html)
    GET  /static/...       its ES modules and styles
    GET  /api/models       the models this server holds: name, architecture, stages, limits
    POST /api/walk         {model, text, decoder_text?, generated?: [id], temperature?,
                           top_k?, top_p?, repetition_penalty?, seed?,
                           interventions?: [{layer, head, mode, factor?}], patch_text?}
                           -> the walk payload (`payload.walk`)
    POST /api/stage        {model, text, name, decoder_text?, generated?, interventions?,
                           patch_text?} -> one stage's whole tensor (`payload.stage`)
    POST /api/lens         {model, text, decoder_text?, generated?, interventions?, patch_text?}
                           -> what each layer would predict at the last position (`lens.py`)
    POST /api/tokens       {model, text} -> how the tokenizer cut the text (`tokenization.py`)
    POST /api/explain      {model, text, method, target?, keep_first?} -> one attribution per
                           token (`explanations.py`: LIME, SHAP, IG, occlusion, gradient x input)
    POST /api/generate     {model, text, max_new_tokens?, sampling fields} -> server-sent
                           events, one per new token (`streaming.py`)
    POST /api/attention_change {model, base, text, layer?, head?} -> each head's attention in
                           ``base`` (pretrained) and ``model`` (its fine-tuned copy), and
                           how far it moved (`attention_change.py`)
    GET  /api/costs        ?model=&seq_len=&batch=&dtype= -> what the model costs: parameters
                           by component, FLOPs per token, KV cache and training activation
                           memory (`glassformer.inspect.cost_report.costs`)
    GET  /views/{view}     ?model=&text=&layer=&head= -> a notebook view's HTML (`views.py`)
    /lab, /api/lab/...     the training lab (`lab_routes.py`, `lab.py`)
    /lessons, /api/lessons/... the course's lessons, run on this machine (`lesson_routes.py`)
    POST /api/lab/open     {run} -> {model: "runs/NAME"}: a run under the lab's runs root, loaded
                           as one more model (its latest checkpoint), to walk or compare

Models are the ones the command line named, loaded once at start; the browser picks one
by name and can never make the server read a path. Every request is validated and a bad
one is answered 400 (404 for an unknown model) with ``{"error": message}``, which the
page shows. Forward passes run one at a time (one lock), off the event loop, always on the
same worker thread: torch's CPU thread pool belongs to the thread that calls it, so moving
between threads would start new pools that compete for the cores (streaming ran ~15%
slower that way).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from glassformer.inspect.cost_report import costs
from glassformer.loading import load
from glassformer.sampling import generation_settings
from glassformer.workshop import payload
from glassformer.workshop.architecture import stages, summary
from glassformer.workshop.attention_change import change as attention_change
from glassformer.workshop.attention_change import origin
from glassformer.workshop.explanations import explain as explain_prediction
from glassformer.workshop.http import RequestError, answer, read_body, request_error
from glassformer.workshop.interventions import HeadInterventions
from glassformer.workshop.lab import Lab
from glassformer.workshop.lab_routes import lab_routes
from glassformer.workshop.lens import lens as lens_payload
from glassformer.workshop.lesson_routes import lesson_routes
from glassformer.workshop.pass_input import PassInput
from glassformer.workshop.streaming import token_events
from glassformer.workshop.tokenization import explain as explain_tokens
from glassformer.workshop.views import view_html

STATIC = Path(__file__).parent / "static"
MAX_TEXT_CHARS = 20_000  # a request body limit; the token limit is the model's max_seq_len
MAX_NEW_TOKENS = 512  # most tokens one /api/generate makes
MAX_INTERVENTIONS = 64  # most heads one walk changes
SAMPLING_FIELDS = {
    "temperature": float,
    "top_k": int,
    "top_p": float,
    "repetition_penalty": float,
    "seed": int,
}


def create_app(
    models: dict[str, Any], runs_root: str | Path = "runs", origins: dict[str, str] | None = None
) -> Starlette:
    """The app serving ``models`` ({name: LanguageModel}); its training lab keeps its runs
    under ``runs_root``. ``origins``: {fine-tuned model: the model it was fine-tuned from},
    both names of ``models`` (the page offers the pair to compare their attention)."""
    if not models:
        raise ValueError("the workshop needs at least one model")
    origins = dict(origins or {})
    lab = Lab(runs_root)
    lock = asyncio.Lock()
    model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="glassformer-model")

    async def on_model_thread(fn, *args):
        return await asyncio.get_running_loop().run_in_executor(model_thread, fn, *args)

    async def run_model(fn, *args):
        async with lock:
            return await on_model_thread(fn, *args)

    async def index(request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html")

    async def list_models(request: Request) -> JSONResponse:
        described = [_describe(name, lm, origins.get(name)) for name, lm in models.items()]
        return JSONResponse({"models": described})

    async def open_run(request: Request) -> JSONResponse:
        """A run of the lab's runs root, loaded as one more model (by name: never a path)."""
        try:
            directory = lab.run_dir((await read_body(request)).get("run"))
        except ValueError as error:
            raise RequestError(str(error)) from None
        name = f"runs/{directory.name}"
        models[name] = await answer(run_model(load, directory), lambda lm: lm)  # its latest checkpoint
        if origin(directory) in models:
            origins[name] = origin(directory)
        return JSONResponse({"model": name})

    async def walk(request: Request) -> JSONResponse:
        body = await read_body(request)
        lm, name = _model(models, body)
        work = run_model(payload.walk, _pass_input(body, lm), _settings(body), name)
        return await answer(work)

    async def stage(request: Request) -> JSONResponse:
        body = await read_body(request)
        lm, _ = _model(models, body)
        trace_name = body.get("name")
        if not isinstance(trace_name, str):
            raise RequestError("name must be a stage's trace name, such as 'blocks.0.attn.pattern'")
        work = run_model(payload.stage, _pass_input(body, lm), trace_name)
        return await answer(work)

    async def lens(request: Request) -> JSONResponse:
        body = await read_body(request)
        lm, _ = _model(models, body)
        if lm.config.family == "encoder" and not lm.config.mlm_head:
            raise RequestError("a sentence encoder has no head to read its layers with: no logit lens")
        work = run_model(lens_payload, _pass_input(body, lm))
        return await answer(work)

    async def explain(request: Request) -> JSONResponse:
        body = await read_body(request)
        lm, _ = _model(models, body)
        target, keep_first = body.get("target"), body.get("keep_first", False)
        if isinstance(target, bool) or (target is not None and not isinstance(target, (str, int))):
            raise RequestError("target must be a token (text or id), or for a sentence encoder a sentence")
        if not isinstance(keep_first, bool):
            raise RequestError("keep_first must be true or false")
        explain_one = functools.partial(explain_prediction, keep_first=keep_first)
        work = run_model(explain_one, lm, _text(body, lm), body.get("method"), target)
        return await answer(work)

    async def attention_changed(request: Request) -> JSONResponse:
        body = await read_body(request)
        after, _ = _model(models, body)
        before, _ = _model(models, {"model": body.get("base")})
        layer, head = body.get("layer"), body.get("head")
        if any(v is not None and (isinstance(v, bool) or not isinstance(v, int)) for v in (layer, head)):
            raise RequestError("layer and head must be integers (or absent: the most moved head)")
        work = run_model(attention_change, before, after, _text(body, after), layer, head)
        return await answer(work)

    async def tokens(request: Request) -> JSONResponse:
        body = await read_body(request)
        lm, _ = _model(models, body)
        return await answer(run_model(explain_tokens, lm, _text(body, lm)))

    async def generate(request: Request) -> StreamingResponse:
        body = await read_body(request)
        lm, _ = _model(models, body)
        if lm.config.family == "encoder":
            raise RequestError("an encoder does not generate text; choose a decoder or an encoder-decoder")
        text, n = _text(body, lm), body.get("max_new_tokens", 64)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_NEW_TOKENS:
            raise RequestError(f"max_new_tokens must be an integer from 1 to {MAX_NEW_TOKENS}, got {n!r}")
        settings = _settings(body, max_new_tokens=n)
        try:
            lm.inputs.single(text)  # a prompt the model can read, checked before the stream starts
        except (ValueError, TypeError) as error:
            raise RequestError(str(error)) from error

        async def events():
            async with lock:  # one forward pass at a time, for the whole generation
                tokens = token_events(lm, text, settings)
                try:
                    while (event := await on_model_thread(next, tokens, None)) is not None:
                        yield event  # a client gone: the response stops asking, so no next token
                finally:  # also when the client left: shielded, it waits for a step in flight
                    with anyio.CancelScope(shield=True):
                        await on_model_thread(tokens.close)  # its hooks come off the model now

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    async def model_costs(request: Request) -> JSONResponse:
        query = dict(request.query_params)
        lm, _ = _model(models, query)
        sizes = {
            key: _index(query, key, default)
            for key, default in (("seq_len", lm.config.max_seq_len), ("batch", 1))
        }
        dtype = query.get("dtype", "float32")
        figures = functools.partial(
            costs, lm.config, **sizes, dtype=dtype, real_parameters=lm.net.num_parameters()
        )
        return await answer(anyio.to_thread.run_sync(lambda: figures().to_dict()))

    async def view(request: Request) -> HTMLResponse:
        query = dict(request.query_params)
        lm, _ = _model(models, query)
        numbers = {key: _index(query, key) for key in ("layer", "head")}
        work = run_model(view_html, lm, request.path_params["view"], _text(query, lm), *numbers.values())
        return await answer(work, HTMLResponse)

    routes = [
        Route("/", index),
        Route("/api/models", list_models),
        Route("/api/walk", walk, methods=["POST"]),
        Route("/api/stage", stage, methods=["POST"]),
        Route("/api/lens", lens, methods=["POST"]),
        Route("/api/tokens", tokens, methods=["POST"]),
        Route("/api/explain", explain, methods=["POST"]),
        Route("/api/generate", generate, methods=["POST"]),
        Route("/api/attention_change", attention_changed, methods=["POST"]),
        Route("/api/costs", model_costs),
        Route("/api/lab/open", open_run, methods=["POST"]),
        Route("/views/{view}", view),
        Route("/favicon.ico", lambda request: Response(status_code=204)),  # the views ask for one
        *lab_routes(lab, STATIC / "lab.html"),
        *lesson_routes(models, STATIC / "lessons.html"),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        await anyio.to_thread.run_sync(lab.shutdown)  # a run still going keeps its checkpoint

    return Starlette(routes=routes, exception_handlers={RequestError: request_error}, lifespan=lifespan)


def _model(models: dict[str, Any], body: dict[str, Any]) -> tuple[Any, str]:
    name = body.get("model")
    if name not in models:
        raise RequestError(f"no model {name!r} here; this workshop holds: {', '.join(models)}", status=404)
    return models[name], name


def _text(body: dict[str, Any], lm) -> str:
    text = body.get("text")
    if not isinstance(text, str) or not text:
        raise RequestError("text must be a non-empty string")
    if len(text) > MAX_TEXT_CHARS:
        raise RequestError(
            f"text has {len(text):,} characters; the workshop takes at most {MAX_TEXT_CHARS:,}"
        )
    if lm.tokenizer is None:
        raise RequestError("this model has no tokenizer, so it cannot read text")
    return text


def _pass_input(body: dict[str, Any], lm) -> PassInput:
    """The forward-pass fields of a walk, stage or lens request, checked."""
    return PassInput(lm, _text(body, lm), _decoder_text(body), _generated(body), _interventions(body, lm))


def _decoder_text(body: dict[str, Any]) -> str | None:
    """An encoder-decoder's decoder text (after its start token), or None."""
    value = body.get("decoder_text")
    if value is not None and not isinstance(value, str):
        raise RequestError("decoder_text must be a string (the decoder's text after its start token)")
    if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
        raise RequestError(f"decoder_text has {len(value):,} characters; at most {MAX_TEXT_CHARS:,}")
    return value or None


def _interventions(body: dict[str, Any], lm) -> HeadInterventions:
    """The heads to change: a list of {layer, head, mode, factor?}, and the patch source text."""
    items, patch_text = body.get("interventions") or [], body.get("patch_text")
    if (
        not isinstance(items, list)
        or len(items) > MAX_INTERVENTIONS
        or not all(isinstance(a, dict) for a in items)
    ):
        raise RequestError(
            f"interventions must be a list of at most {MAX_INTERVENTIONS} {{layer, head, mode}} objects"
        )
    if patch_text is not None and (not isinstance(patch_text, str) or len(patch_text) > MAX_TEXT_CHARS):
        raise RequestError(f"patch_text must be a string of at most {MAX_TEXT_CHARS:,} characters")
    try:
        return HeadInterventions(lm, items, patch_text)
    except ValueError as error:
        raise RequestError(str(error)) from None


def _generated(body: dict[str, Any]) -> list[int]:
    """Token ids a generation appended to the text (checked against the vocabulary later)."""
    generated = body.get("generated") or []
    if not isinstance(generated, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in generated
    ):
        raise RequestError("generated must be a list of token ids")
    if len(generated) > MAX_NEW_TOKENS:
        raise RequestError(f"generated holds {len(generated)} tokens; at most {MAX_NEW_TOKENS}")
    return generated


def _settings(body: dict[str, Any], max_new_tokens: int = 1):
    """GenerationSettings from the request's sampling fields (absent or null: not set)."""
    options: dict[str, Any] = {}
    for field, kind in SAMPLING_FIELDS.items():
        value = body.get(field)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (kind is int and value != int(value))
        ):
            raise RequestError(
                f"{field} must be {'an integer' if kind is int else 'a number'}, got {value!r}"
            )
        options[field] = kind(value)
    try:
        return generation_settings(max_new_tokens=max_new_tokens, **options)
    except ValueError as error:
        raise RequestError(str(error)) from None


def _index(query: dict[str, str], key: str, default: int = 0) -> int:
    """An integer from the query string: a layer, a head, a length (absent: ``default``)."""
    value = query.get(key, str(default))
    try:
        return int(value)
    except ValueError:
        raise RequestError(f"{key} must be an integer, got {value!r}") from None


def _describe(name: str, lm, fine_tuned_from: str | None = None) -> dict[str, Any]:
    config = lm.config
    return {
        "name": name,
        "fine_tuned_from": fine_tuned_from,
        "parameters": lm.net.num_parameters(),
        "max_seq_len": config.max_seq_len,
        "reads_text": lm.tokenizer is not None,
        "architecture": summary(config),
        "stages": stages(config),
    }
