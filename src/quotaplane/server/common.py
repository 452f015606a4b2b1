"""Small helpers shared by the route modules: documented error responses, JSON answers, name checks."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from quotaplane.server.errors import ApiError, validation_message
from quotaplane.server.models import GROUP_PATTERN, QUEUE_PATTERN, USER_PATTERN, ErrorBody

M = TypeVar("M", bound=BaseModel)

__all__ = [
    "DOCUMENTED_BODIES",
    "GROUP_PATTERN",
    "GROUP_RE",
    "QUEUE_PART_RE",
    "QUEUE_PATTERN",
    "USER_PATTERN",
    "USER_RE",
    "any_case",
    "errors",
    "json",
    "json_body",
    "parse_body",
    "resource_dict",
]

#: Reference Appendix B regexes (YuniKorn's webservice checks the same). ``\Z``, not ``$``: Go's
#: ``$`` is the end of the text, Python's also matches before a final newline.
QUEUE_PART_RE = re.compile(r"^[a-zA-Z0-9_:#/@-]{1,64}\Z")
USER_RE = re.compile(r"^[_a-zA-Z][a-zA-Z0-9:#/_.@-]*[$]?\Z")
GROUP_RE = re.compile(r"^[_a-zA-Z][a-zA-Z0-9:_.-]*\Z")



def any_case(*words: str) -> str:
    """An ECMA pattern matching any of ``words`` in any letter case (YuniKorn lower-cases them)."""
    def one(word: str) -> str:
        return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)
    return "^(" + "|".join(one(w) for w in words) + ")$"

_DESCRIPTIONS = {
    400: "bad request: malformed body, wrong type, amount outside int64, invalid name, rejected",
    401: "missing or unknown bearer token",
    403: "the token's role or the user's queue ACL does not allow this",
    404: "unknown partition, queue, user, group, application, allocation, node or quota",
    409: "conflict with existing state (duplicate id) or the request does not fit",
    413: "the body is larger than max-body-bytes (or a batch longer than max-batch)",
    502: "the store or the partition's leader did not confirm the commit (`outcome`: unknown): the "
         "change may or may not have been applied; read it back, or retry (an allocation key makes a "
         "retry safe)",
    503: "not the leader (see `leader`) or the store is unavailable; nothing was changed",
}


def errors(*codes: int, auth: bool = False, write: bool = False) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the given error statuses (plus 401/403 with ``auth``, 502 and 503
    with ``write``)."""
    wanted = {400, *codes}
    if auth:
        wanted |= {401, 403}
    if write:
        wanted |= {502, 503}
    return {c: {"model": ErrorBody, "description": _DESCRIPTIONS.get(c, "error")} for c in sorted(wanted)}


def json(content: Any, status_code: int = 200) -> JSONResponse:
    """A JSON answer."""
    return JSONResponse(content, status_code=status_code)


def resource_dict(r: Any) -> dict[str, int]:
    """A Resource (or None) as a plain dict for JSON."""
    if r is None:
        return {}
    return {k: int(v) for k, v in r.items()}


def check_queue_name(queue: str) -> str:
    """400 unless every dot-separated part matches the queue regexp (reference §2.3)."""
    parts = queue.split(".")
    for part in parts:
        if not QUEUE_PART_RE.match(part):
            raise ApiError(400, f"problem in queue query parameter parsing as queue param {queue} "
                                f"contains invalid queue name {part}. Queue name must only have "
                                "alphanumeric characters, - or _, and be no longer than 64 characters")
    return queue.lower()


#: Request body models documented through ``openapi_extra`` (added to the components by the app).
DOCUMENTED_BODIES: dict[str, type[BaseModel]] = {}


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` declaring ``model`` as the required JSON request body."""
    DOCUMENTED_BODIES[model.__name__] = model
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}}


async def parse_body(request: Request, model: type[M]) -> M:
    """Read and validate a JSON body with pydantic-core's JSON parser (400 on any problem).

    Faster than FastAPI's body parameters (no ``json.loads`` + dependency pass): this is the hot
    path of allocations.
    """
    raw = await request.body()
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        message, description = validation_message(exc.errors(include_url=False))
        raise ApiError(400, message, description) from None
