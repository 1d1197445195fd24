"""The routes that answer pages and their files, not JSON:

GET  /                 the page (static/index.html, its modules preloaded: `module_graph.py`)
GET  /static/...       its ES modules and styles (`static/`; `viz/assets` at static/viz/)
GET  /teach            ?<the page's settings> -> a page with the link that opens this walk in
                       teaching mode in a class's fresh browsers (token included: when a
                       class runs, the students' token, never the teacher's); answered
                       only to a top-level navigation, never to a script (`teach.py`)
GET  /views/{view}     ?model=&text=&layer=&head= -> a notebook view's HTML (`views.py`),
                       with its own Content-Security-Policy
GET  /favicon.ico      204: the views ask for one
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from glassformer.workshop.door.http import answer, read_query
from glassformer.workshop.door.request_types import ViewQuery
from glassformer.workshop.model_work import Workshop
from glassformer.workshop.module_graph import with_preloads
from glassformer.workshop.reading.views import policy, view_html
from glassformer.workshop.teach import teach_page

STATIC = Path(__file__).parent / "static"
VIZ_ASSETS = Path(__file__).resolve().parents[1] / "viz" / "assets"  # served at static/viz/


def page_routes(workshop: Workshop, token: str | Callable[[], str]) -> list[BaseRoute]:
    """The routes above; a view draws one of ``workshop``'s models; /teach shows ``token``
    (or what it returns, asked at each request: a class's students' token, which changes).
    The static mounts come last in the app's routes (they answer every path under them)."""
    page = with_preloads(STATIC / "index.html", {"": STATIC, "viz/": VIZ_ASSETS}, "js/main.js")  # read once

    async def index(request: Request) -> HTMLResponse:
        return HTMLResponse(page)

    async def view(request: Request) -> HTMLResponse:
        query = read_query(request, ViewQuery)
        lm = workshop.reader(query.model, "views", query.text)
        kind = request.path_params["view"]
        work = workshop.run_model(request, "views", view_html, lm, kind, query.text, query.layer, query.head)
        return await answer(
            work, lambda page: HTMLResponse(page, headers={"Content-Security-Policy": policy(page)})
        )

    return [
        Route("/", index),
        Route("/teach", lambda request: teach_page(request, token() if callable(token) else token)),
        Route("/views/{view}", view),
        Route("/favicon.ico", lambda request: Response(status_code=204)),  # the views ask for one
        Mount(
            "/static/viz", StaticFiles(directory=VIZ_ASSETS), name="viz"
        ),  # the modules shared with the views
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
