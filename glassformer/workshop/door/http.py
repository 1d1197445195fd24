"""What every route of the workshop shares: a request the page must fix is answered 4xx
with ``{"error": message}`` (which the page shows), never a traceback.

`read_request` reads a JSON body into the route's typed request (`request_types.py`): at
most `MAX_BODY_BYTES`, counted while it arrives (a larger one is refused before it is
parsed), then parsed and validated by pydantic (nesting deeper than 200 refused by its
parser, not by Python's recursion). `read_query` does the same for a query string.
`answer` turns what a piece of work returns into a response, and the library's ValueError /
TypeError / KeyError on an input the types let through (a layer past the model's last, a
text longer than its context) into a 400 with the library's message.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

MAX_BODY_BYTES = 1 << 20  # 1 MiB: three texts of 20,000 characters, even as \u escapes
SHOWN_VALUE_CHARS = 60

T = TypeVar("T", bound=BaseModel)


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
    except RequestError:
        raise
    except (ValueError, TypeError, KeyError) as error:
        raise RequestError(str(error.args[0]) if error.args else type(error).__name__) from error


async def request_error(request: Request, error: RequestError) -> JSONResponse:
    return JSONResponse({"error": str(error)}, status_code=error.status)


async def read_request(request: Request, kind: type[T]) -> T:
    """The body of ``request`` as a ``kind``: 413 past `MAX_BODY_BYTES`, 400 with each problem
    named (field, what was wrong, what was sent) for anything ``kind`` does not accept."""
    body = await read_bounded(request)
    if not body.strip() and any(field.is_required() for field in kind.model_fields.values()):
        raise RequestError(
            f"the body is empty: it must be a JSON object with the fields {', '.join(kind.model_fields)}"
        )
    try:
        return kind.model_validate_json(body or b"{}")
    except ValidationError as error:
        raise RequestError(explain(error, kind)) from None


def read_query(request: Request, kind: type[T]) -> T:
    """The query string of ``request`` as a ``kind`` (a repeated key: its last value)."""
    try:
        return kind.model_validate(dict(request.query_params))
    except ValidationError as error:
        raise RequestError(explain(error, kind)) from None


async def read_bounded(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The raw body, refused (413) as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RequestError(_too_large(int(declared), limit), status=413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestError(_too_large(size, limit), status=413)
        chunks.append(chunk)
    return b"".join(chunks)


def explain(error: ValidationError, kind: type[BaseModel]) -> str:
    """A ValidationError in words a page or a script can act on, one problem per clause."""
    problems = []
    for item in error.errors(include_url=False)[:5]:
        where = ".".join(str(part) for part in item["loc"])
        if item["type"] == "extra_forbidden":
            problems.append(f"unknown field {where!r}; this request takes: {', '.join(kind.model_fields)}")
        elif item["type"] == "value_error":  # a request type's own check: its message as it is
            problems.append(f"{where}: {item['ctx']['error']}")
        elif item["type"] == "missing":
            problems.append(f"the field {where!r} is missing")
        elif item["type"] == "json_invalid":
            problems.append(f"the body must be JSON ({item['msg']})")
        elif item["type"] == "model_type" and not where:
            fields = ", ".join(kind.model_fields)
            problems.append(f"the body must be a JSON object with the fields {fields}")
        else:
            sent = repr(item.get("input"))
            sent = sent if len(sent) <= SHOWN_VALUE_CHARS else sent[:SHOWN_VALUE_CHARS] + "…"
            problems.append(f"{where or 'body'}: {item['msg'][0].lower()}{item['msg'][1:]} (got {sent})")
    return "; ".join(problems)


def _too_large(size: int, limit: int) -> str:
    return f"the request body has {size:,} bytes; the workshop takes at most {limit:,}"
