"""The service's error model: every error is ``{"status_code", "message", "description"}``.

Decision S3: bad input is never a 500 and never FastAPI's default 422 body. Every failure of the
caller — a body that is not JSON, a field of the wrong type, an amount outside int64, an unknown
partition, a duplicate id, a rejected placement — becomes a 4xx with YuniKorn's ``dao.YAPIError``
shape (reference §2.1); ``description`` repeats the message and adds the cause when there is one, as
YuniKorn does. A fault of the server is not the caller's (issue 14 #3): a write sent to a follower
or a store that failed is 503 (nothing changed, retry), a write whose commit may or may not have
been applied is 502 with ``"outcome": "unknown"`` (issue 32 #3: never a 503 then), anything
unexpected is 500 "internal server error". Neither carries internal text (paths, exception
names): the detail goes to the log.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from quotaplane.errors import (
    ConfigError,
    ConflictError,
    NotFoundError,
    NotLeaderError,
    QuotaplaneError,
    RejectedError,
)
from quotaplane.server.models import amount_message

__all__ = [
    "INTERNAL_ERROR",
    "OUTCOME_UNKNOWN",
    "RECOVERING",
    "STORE_UNAVAILABLE",
    "ApiError",
    "error_body",
    "error_response",
    "install_error_handlers",
    "status_for",
]

_log = logging.getLogger("quotaplane.server")

_ACL_WORD = re.compile(r"\bacl\b", re.IGNORECASE)

#: Status used for a write that reached an instance which is not the partition's leader.
NOT_LEADER_STATUS = 503

#: The message of a 503 for a failed store (the detail is logged, never answered).
STORE_UNAVAILABLE = "store unavailable: nothing was changed; retry later"

#: The message of a 503 while a partition waits to be rebuilt from its journal (issue 14 #2).
RECOVERING = "the partition is recovering from a store failure: nothing was changed; retry later"

#: The status and message of a write whose commit may or may not have been applied (issue 32 #3).
OUTCOME_UNKNOWN_STATUS = 502
OUTCOME_UNKNOWN = ("the store did not confirm the commit: the change may or may not have been applied; "
                   "read it back, or retry (an allocation key makes a retry safe)")

#: The message of a 500 (the exception is logged, never answered).
INTERNAL_ERROR = "internal server error"


class ApiError(Exception):
    """An error raised by a route with an explicit HTTP status (and optional extra body keys)."""

    def __init__(self, status_code: int, message: str, description: str | None = None,
                 extra: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.headers = headers
        self.status_code = status_code
        self.message = message
        self.description = description if description is not None else message
        self.extra = extra or {}


def error_body(status_code: int, message: str, description: str | None = None,
               **extra: Any) -> dict[str, Any]:
    """The YuniKorn error body (``dao.YAPIError``) plus optional extra keys (``leader`` …)."""
    body: dict[str, Any] = {
        "status_code": status_code,
        "message": message,
        "description": description if description is not None else message,
    }
    body.update(extra)
    return body


def error_response(status_code: int, message: str, description: str | None = None,
                   headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    """A :class:`JSONResponse` carrying :func:`error_body`."""
    return JSONResponse(error_body(status_code, message, description, **extra),
                        status_code=status_code, headers=headers)


def _is_acl(err: BaseException) -> bool:
    # The partition signals an ACL refusal with a RejectedError; it may carry a code attribute, else
    # the message names the ACL (decision S2: an ACL refusal is 403, any other rejection 400).
    code = getattr(err, "code", None)
    if isinstance(code, str):
        return code.startswith("acl")
    # the word "ACL" (the partition says "(submit ACL)"), not a queue that happens to contain it
    return _ACL_WORD.search(str(err)) is not None


def _is_store_failure(err: BaseException) -> bool:
    # quotaplane.journal.JournalError (the store failed: I/O, database down, locked …) — matched by
    # name so this module does not import the journal package.
    return any(cls.__name__ == "JournalError" for cls in type(err).__mro__)


def _outcome_unknown(err: BaseException) -> bool:
    # quotaplane.journal.OutcomeUnknownError, matched by name like JournalError
    return any(cls.__name__ == "OutcomeUnknownError" for cls in type(err).__mro__)


def status_for(err: BaseException) -> int:
    """The HTTP status of a quotaplane (or plain ValueError/KeyError) exception; anything else,
    ``TypeError`` included, is a fault of the service (500)."""
    if isinstance(err, ApiError):
        return err.status_code
    if _outcome_unknown(err):
        return OUTCOME_UNKNOWN_STATUS
    if isinstance(err, NotLeaderError) or _is_store_failure(err):
        return NOT_LEADER_STATUS
    return _input_status(err)


def _input_status(err: BaseException) -> int:
    """The 4xx of an error the request caused (bad input, not found, a conflict); 500 otherwise."""
    if isinstance(err, NotFoundError):
        return 404
    if isinstance(err, ConflictError):
        return 409
    if isinstance(err, RejectedError):
        return 403 if _is_acl(err) else 400
    if isinstance(err, (ConfigError, ValueError)):
        return 400
    # a TypeError is not bad input: bodies are typed at the edge (pydantic), so one raised while
    # serving is a fault of the service — a 500, never a 4xx that clients would not retry
    if isinstance(err, KeyError):
        return 404
    return 500


def _message(err: BaseException) -> str:
    if isinstance(err, KeyError) and not isinstance(err, NotFoundError):
        # KeyError("x") prints as "'x'"; say what was not found instead.
        arg = err.args[0] if err.args else ""
        return f"not found: {arg}"
    text = str(err)
    return text or type(err).__name__


#: a journal lease holder: "<advertised URL>#<instance id>" (server.ha), quoted or not
_HOLDER_ID = re.compile(r"#[0-9a-f]{6,}\b")


def _not_leader(err: NotLeaderError, status: int, message: str) -> JSONResponse:
    # A journal lease holder is "<advertised URL>#<instance id>" (server.ha): answer the URL, and
    # never the instance ids (issue 32 item 12: the journal's fencing message names both holders)
    leader = err.leader.split("#", 1)[0] if isinstance(err.leader, str) else None
    if _HOLDER_ID.search(message):
        _log.warning("not the leader: %s", message)
        message = _HOLDER_ID.sub("", message)
    headers = {"Retry-After": "1"}
    if leader:
        headers["X-Quotaplane-Leader"] = leader
    return error_response(status, message, f"{message}; send writes to the leader: {leader}",
                          headers=headers, leader=leader)


def _config_error(err: ConfigError, status: int, message: str) -> JSONResponse:
    """A configuration refused: its message with the first line, and every problem with its line."""
    problems = [{"line": line, "reason": reason} for line, reason in err.problems]
    where = f" (line {err.line})" if err.line and not message.startswith("line") else ""
    return error_response(status, message, f"{message}{where}", line=err.line, problems=problems)


def _store_failure(err: BaseException, status: int) -> JSONResponse:
    """The store failed: nothing was acknowledged; the caller may retry. Its text names files and
    hosts: the log gets it, the caller does not."""
    _log.error("store unavailable: %s: %s", type(err).__name__, err)
    recovering = any(cls.__name__ == "StoreUnavailableError" for cls in type(err).__mro__)
    return error_response(status, RECOVERING if recovering else STORE_UNAVAILABLE,
                          headers={"Retry-After": "1"})


def exception_response(err: BaseException) -> JSONResponse:
    """Turn any exception into the error response (used by the handlers and by routes)."""
    if isinstance(err, ApiError):
        return error_response(err.status_code, err.message, err.description, headers=err.headers,
                              **err.extra)
    status = status_for(err)
    message = _message(err)
    if isinstance(err, NotLeaderError):
        return _not_leader(err, status, message)
    if isinstance(err, ConfigError):
        return _config_error(err, status, message)
    if status == OUTCOME_UNKNOWN_STATUS and _outcome_unknown(err):
        _log.error("commit outcome unknown: %s: %s", type(err).__name__, err)
        return error_response(status, OUTCOME_UNKNOWN, outcome="unknown")
    if status == NOT_LEADER_STATUS:
        return _store_failure(err, status)
    if status == 500:
        _log.error("internal server error", exc_info=err)
        return error_response(500, INTERNAL_ERROR)
    return error_response(status, message)


def _loc(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    return ".".join(parts) if parts else "body"


def validation_message(errors: Sequence[Any]) -> tuple[str, str]:
    """(message, description) for a list of pydantic/FastAPI validation errors."""
    lines = []
    for e in errors:
        kind = e.get("type", "")
        where = _loc(e.get("loc", ()))
        if kind == "json_invalid":
            ctx = e.get("ctx") or {}
            lines.append(f"request body is not valid JSON: {ctx.get('error', 'parse error')}")
        elif kind == "missing":
            lines.append(f"{where}: field required")
        elif kind == "amount_type":         # a resource amount: name its unit (the map key is last)
            lines.append(f"{where}: {amount_message(str(e['loc'][-1]), e.get('input'))}")
        else:
            lines.append(f"{where}: {e.get('msg', 'invalid value')}")
    if not lines:
        return "invalid request", "invalid request"
    return lines[0], "; ".join(lines)


_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    409: "Conflict",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
}


#: the header Go's ``http.Error`` adds to its plain-text answers
_GO_TEXT = {"X-Content-Type-Options": "nosniff"}


def _routes(routes: Sequence[Any]) -> Iterator[Any]:
    """Every route, through included routers (FastAPI keeps an included router as one entry)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _routes(inner.routes)
        else:
            yield route


def _allowed_methods(app: FastAPI, path: str) -> list[str]:
    methods: set[str] = set()
    for route in _routes(app.routes):
        regex = getattr(route, "path_regex", None)
        if regex is not None and regex.match(path):
            methods.update(getattr(route, "methods", None) or ())
    methods.discard("HEAD")
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    """Install the handlers that map every failure to the YuniKorn error body (S3)."""

    async def on_validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        message, description = validation_message(exc.errors())
        return error_response(400, message, description)

    async def on_http(request: Request, exc: StarletteHTTPException) -> Response:
        status = exc.status_code if 400 <= exc.status_code < 500 else 400
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if status == 404 and detail == "Not Found":
            # no route: what YuniKorn's router answers (Go's http.NotFound), not an error body
            return PlainTextResponse("404 page not found\n", 404, headers=_GO_TEXT,
                                     media_type="text/plain; charset=utf-8")
        if status == 405 and detail == "Method Not Allowed":
            # httprouter's HandleMethodNotAllowed: Allow lists every method of the path
            allow = ", ".join(_allowed_methods(app, request.url.path))
            return PlainTextResponse("Method Not Allowed\n", 405, headers={**_GO_TEXT, "Allow": allow},
                                     media_type="text/plain; charset=utf-8")
        message = detail or _REASONS.get(status, "error")
        headers = dict(getattr(exc, "headers", None) or {})
        return error_response(status, message, headers=headers or None)

    async def on_quotaplane(_request: Request, exc: Exception) -> JSONResponse:
        return exception_response(exc)

    app.add_exception_handler(RequestValidationError, on_validation)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, on_http)  # type: ignore[arg-type]
    for cls in (ApiError, QuotaplaneError, ValueError, KeyError, TypeError, Exception):
        app.add_exception_handler(cls, on_quotaplane)
