"""What every route of the workshop shares: a request the page must fix is answered 4xx
with ``{"error": message}`` (which the page shows), never a traceback.

`read_body` reads a JSON object; `answer` turns what a piece of work returns into a
response, and the library's ValueError / TypeError / KeyError on an input the route's own
checks let through into a 400 with the library's message.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse


class RequestError(ValueError):
    """A request the page must fix: answered with ``status`` and the message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


async def answer(work, response=JSONResponse):
    """``response`` (JSON, or HTML) of what ``work`` returns; the library's ValueError /
    TypeError on an input the route's own checks let through becomes a 400 with its message."""
    try:
        return response(await work)
    except (ValueError, TypeError, KeyError) as error:
        raise RequestError(str(error.args[0]) if error.args else type(error).__name__) from error


async def request_error(request: Request, error: RequestError) -> JSONResponse:
    return JSONResponse({"error": str(error)}, status_code=error.status)


async def read_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RequestError("the request body must be JSON") from None
    if not isinstance(body, dict):
        raise RequestError('the request body must be a JSON object, such as {"model": ..., "text": ...}')
    return body
