"""The webhooks over HTTP(S), as the apiserver calls them, and the namespace cache they read.

Routes (YuniKorn's ``Serve``, reference ``kubernetes-front.md`` §2.2): ``POST /mutate``,
``POST /validate-conf`` and ``POST /validate-identity`` take an ``admission.k8s.io/v1``
AdmissionReview and answer one (200). Before the review is read: an empty body is 400 and a
``Content-Type`` other than ``application/json`` is 415, as in YuniKorn; a body that is not an
AdmissionReview is answered with a refusal naming what is wrong (the apiserver shows it to the
client). ``GET /healthz`` answers while the process lives; ``GET /readyz`` once the namespace cache is
filled (before that, a pod's ``enableYuniKorn`` annotation is unknown).

Every replica serves the webhooks, leader or not: they only compute a patch (reference §6.4).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from quotaplane.kube.api import ApiCallError, KubeApi
from quotaplane.kube.informer import Informer
from quotaplane.kube.objects import mapping
from quotaplane.kube.webhook import (
    WebhookOptions,
    mutate,
    review_error,
    validate_config_map,
    validate_identity,
)

__all__ = ["WEBHOOK_PATHS", "NamespaceCache", "webhook_app"]

log = logging.getLogger("quotaplane.kube.http")

#: the paths this module serves (the process sends every other path to the REST service)
WEBHOOK_PATHS = ("/mutate", "/validate-conf", "/validate-identity", "/healthz", "/readyz")
#: largest AdmissionReview read (the apiserver sends at most a few MB: one object and its old copy)
_MAX_BODY = 8 * 1024 * 1024


class NamespaceCache:
    """Every namespace's object, listed then watched (the webhook reads ``enableYuniKorn`` from it);
    the watch resumes from its bookmarks (:mod:`quotaplane.kube.informer`), so a quiet cluster's
    watch timeouts cost one request each, not a relisting."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self._items: dict[str, dict[str, Any]] = {}
        #: set once the first listing is in
        self.synced = asyncio.Event()
        self.informer = Informer(api, "namespaces")

    def get(self, name: str) -> Mapping[str, Any] | None:
        """The namespace ``name`` as last seen (None: unknown)."""
        return self._items.get(name)

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None:
        """One ADDED / MODIFIED / DELETED namespace."""
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str):
            return
        if event_type == "DELETED":
            self._items.pop(name, None)
        else:
            self._items[name] = dict(obj)

    async def run(self) -> None:
        """List (until it works), then follow the watch for ever."""
        failures = 0
        while True:
            try:
                items = await self.informer.list()
                break
            except ApiCallError as exc:
                failures += 1
                log.warning("namespaces: %s", exc)
                await asyncio.sleep(min(30.0, 0.5 * 2 ** min(failures, 6)))
        await self._resync(items)
        self.synced.set()
        await self.informer.run(self._event, self._resync)

    async def _event(self, event_type: str, obj: dict[str, Any]) -> None:
        self.apply(event_type, obj)

    async def _resync(self, items: list[dict[str, Any]]) -> None:
        fresh: dict[str, dict[str, Any]] = {}
        for obj in items:
            name = mapping(obj.get("metadata")).get("name")
            if isinstance(name, str):
                fresh[name] = dict(obj)
        self._items = fresh


Review = Callable[[Any, WebhookOptions], dict[str, Any]]


def _endpoint(review: Review, options: WebhookOptions) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        body = await request.body()
        if not body:
            return PlainTextResponse("empty body", status_code=400)
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            return PlainTextResponse(f"Content-Type={content_type}, expected application/json",
                                     status_code=415)
        if len(body) > _MAX_BODY:
            return PlainTextResponse(f"body larger than {_MAX_BODY} bytes", status_code=413)
        try:
            data = json.loads(body)
        except ValueError as exc:
            return JSONResponse(review_error({}, f"the body is not JSON: {exc}"))
        try:
            return JSONResponse(review(data, options))
        except ValueError as exc:        # not an AdmissionReview: refused with the reason
            return JSONResponse(review_error(data, str(exc)))
    return handle


def webhook_app(options: WebhookOptions, ready: Callable[[], bool] = lambda: True) -> Starlette:
    """The webhooks' ASGI app: ``/mutate``, ``/validate-conf``, ``/healthz``, ``/readyz``."""
    async def healthz(_request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(_request: Request) -> Response:
        return PlainTextResponse("ok") if ready() else PlainTextResponse("namespaces not listed yet",
                                                                         status_code=503)

    return Starlette(routes=[
        Route("/mutate", _endpoint(mutate, options), methods=["POST"]),
        Route("/validate-conf", _endpoint(validate_config_map, options), methods=["POST"]),
        Route("/validate-identity", _endpoint(validate_identity, options), methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ])
