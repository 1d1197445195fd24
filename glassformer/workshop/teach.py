"""``GET /teach``: the link that opens a walk in teaching mode in a class's browsers.

A student's fresh browser has no cookie, so the link must carry the token. The page that
builds it (`main.js`'s "Teach this") never reads the token: it navigates here with its
settings, and this page shows the link to the teacher, to copy and share. Only a top-level
navigation gets it (``Sec-Fetch-Mode: navigate``, ``Sec-Fetch-Dest: document``): a script,
even one on the workshop's own page, cannot fetch it, and no other page can frame it
(`guard.py`). Every value from the query is escaped; the page's one script is a file
(``static/js/teach.js``, the Copy button), as the Content-Security-Policy requires.
"""

from __future__ import annotations

import html
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

SECRETS = ("token", "login")


def teach_page(request: Request, token: str) -> Response:
    """The page holding the teaching link of the settings in ``request``'s query."""
    fetch_mode, fetch_dest = request.headers.get("sec-fetch-mode"), request.headers.get("sec-fetch-dest")
    if (fetch_mode, fetch_dest) != ("navigate", "document") and (fetch_mode or fetch_dest):
        return JSONResponse({"error": "the teaching link is shown only to a page opened in the browser"}, 403)
    settings = [(k, v) for k, v in request.query_params.multi_items() if k not in (*SECRETS, "lock")]
    query = urlencode([*settings, ("lock", "1"), ("token", token)])
    link = str(request.url.replace(path="/", query=query))
    page = _PAGE.format(link=html.escape(link, quote=True))
    return HTMLResponse(page, headers={"Cache-Control": "no-store"})


_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Glassformer: teach this</title>
<link rel="icon" href="data:,"><link rel="stylesheet" href="static/style.css">
<script type="module" src="static/js/teach.js"></script></head>
<body class="teach-page">
<h1>Teach this walk</h1>
<p>This link opens the walk in teaching mode, step by step, in any browser of your class.
It holds the workshop's token: share it with your class only.</p>
<p><label>The link <input id="teach-link" class="teach-link" readonly value="{link}"></label></p>
<p><button id="teach-copy" type="button">Copy the link</button>
<span id="teach-copied" role="status"></span></p>
<p><a id="teach-open" href="{link}">Open it here</a> · <a href="./" id="teach-back">Back to the walk</a></p>
</body></html>"""
