"""``quotaplane kube``: the front as one process — webhooks, leader election, controller, REST service.

Every replica serves the admission webhooks at once (they only compute patches) and campaigns for the
Lease. The replica that holds it opens the store (journal restored, the same as ``serve``), starts the
REST service on the same port and runs the controller. A leader that cannot renew its Lease stops
(exit 1) before another replica can take over — client-go's rule — and Kubernetes restarts it as a
follower. On SIGTERM the Lease is released, so a successor does not wait out its duration.

Until a replica leads, REST paths answer 503 (``not the leader``, naming the holder when known).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quotaplane.errors import QuotaplaneError
from quotaplane.kube.api import KubeApi, client_config
from quotaplane.kube.controller import Controller, ControllerOptions
from quotaplane.kube.http import WEBHOOK_PATHS, NamespaceCache, webhook_app
from quotaplane.kube.lease import LeaseElector
from quotaplane.kube.webhook import WebhookOptions

__all__ = ["FrontOptions", "run_front", "serve_front"]

log = logging.getLogger("quotaplane.kube")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def _identity() -> str:
    # client-go's convention: the pod's name (its hostname) and a random suffix
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class FrontOptions:
    """Everything ``quotaplane kube`` is told (see ``quotaplane kube --help``)."""

    #: queue configuration file (optional: the ConfigMap ``yunikorn-configs`` is applied when present)
    config: Path | None = None
    store: str | None = None
    host: str = "0.0.0.0"
    port: int = 9443
    #: PEM files for HTTPS (the apiserver calls webhooks over TLS only)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    #: the front's own namespace (its ConfigMap, Lease and Events about it)
    namespace: str = "quotaplane-system"
    lease_name: str = "quotaplane-front"
    identity: str = field(default_factory=_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    #: the API server (None: in-cluster service account, then kubeconfig)
    kube_server: str | None = None
    kube_token: str | None = None
    kubeconfig: str | None = None
    controller: ControllerOptions = field(default_factory=ControllerOptions)
    webhook: WebhookOptions = field(default_factory=WebhookOptions)


class _Leading:
    """What the leader serves besides the webhooks (None until this replica leads), and the election
    (for the leader's name in a follower's answers)."""

    __slots__ = ("controller", "elector", "rest")

    def __init__(self, elector: LeaseElector) -> None:
        self.rest: Any = None
        self.controller: Controller | None = None
        self.elector = elector


class _Dispatch:
    """Webhook paths to the webhooks; everything else to the REST service of the leader (503 before)."""

    def __init__(self, hooks: Any, leading: _Leading) -> None:
        self.hooks = hooks
        self.leading = leading

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return
        if scope["type"] == "http" and scope.get("path") in WEBHOOK_PATHS:
            await self.hooks(scope, receive, send)
            return
        rest = self.leading.rest
        if rest is not None:
            await rest(scope, receive, send)
            return
        from starlette.responses import JSONResponse

        elector = self.leading.elector
        # a replica asked before its first look at the Lease waits for it (bounded): the answer names
        # the leader whenever there is one, however soon after start the question comes
        name = await elector.known_holder(elector.renew_deadline)
        holder = f" (the leader is {name})" if name and name != elector.identity else ""
        await JSONResponse({"status_code": 503, "message": f"not the leader{holder}",
                            "description": "this replica serves the admission webhooks only; the REST "
                                           "service runs on the replica holding the Lease"},
                           status_code=503)(scope, receive, send)


async def run_front(options: FrontOptions, *, started: asyncio.Event | None = None) -> int:
    """Run until SIGTERM-like cancellation or a lost Lease; the exit code (1: the Lease was lost)."""
    import uvicorn

    api = KubeApi(client_config(options.kube_server, options.kube_token, options.kubeconfig))
    namespaces = NamespaceCache(api)
    webhook = dataclasses.replace(options.webhook, config_namespace=options.namespace,
                                  namespace=namespaces.get)
    elector = LeaseElector(api, name=options.lease_name, namespace=options.namespace,
                           identity=options.identity, lease_duration=options.lease_duration,
                           renew_deadline=options.renew_deadline, retry_period=options.retry_period)
    leading = _Leading(elector)
    app = _Dispatch(webhook_app(webhook, ready=namespaces.synced.is_set), leading)
    server = uvicorn.Server(uvicorn.Config(
        app, host=options.host, port=options.port, lifespan="off", log_level="warning", access_log=False,
        ssl_certfile=str(options.tls_cert) if options.tls_cert else None,
        ssl_keyfile=str(options.tls_key) if options.tls_key else None, timeout_graceful_shutdown=5))
    code = 0
    tasks = [asyncio.create_task(namespaces.run()), asyncio.create_task(elector.run())]
    serving = asyncio.create_task(server.serve())
    leader = asyncio.create_task(_lead(options, api, elector, leading))
    try:
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if started is not None:
            started.set()
        done, _ = await asyncio.wait({serving, leader, *tasks}, return_when=asyncio.FIRST_COMPLETED)
        if elector.lost.is_set():
            log.error("quotaplane: lost the lease %s/%s; stopping", options.namespace, options.lease_name)
            code = 1
        elif leader in done and leader.exception() is not None:
            log.error("quotaplane: the leader failed: %s", leader.exception())
            code = 1
        elif tasks[0] in done:
            # the namespace watch retries what the API server answers; anything else (credentials
            # the client cannot get: an exec plug-in failing) ended it, and the front would have
            # stayed up, never ready, saying nothing
            failure = tasks[0].exception()
            log.error("quotaplane: the namespace watch stopped: %s: %s; stopping",
                      type(failure).__name__, failure)
            code = 1
    finally:
        server.should_exit = True
        for task in tasks:
            task.cancel()
        await _cancel_until_done(leader)
        await elector.release()
        for task in tasks:
            await _cancel_until_done(task)
        with contextlib.suppress(BaseException):
            await serving           # uvicorn's own bound: timeout_graceful_shutdown
        await api.close()
    return code


async def _cancel_until_done(task: asyncio.Task[Any], every: float = 0.5) -> None:
    """Cancel ``task`` and wait for its end, cancelling again while it runs on: Python 3.11's
    ``asyncio.wait_for`` loses a cancellation that arrives as the awaited call completes (cpython
    gh-86296), and one lost cancellation kept a stopping front alive."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=every)
    if not task.cancelled():
        task.exception()            # retrieved: a failure was already reported by the caller


async def _lead(options: FrontOptions, api: KubeApi, elector: LeaseElector, leading: _Leading) -> None:
    """Wait for the Lease, then open the store and run the REST service and the controller."""
    from quotaplane.server.app import create_app
    from quotaplane.server.auth import load_tokens
    from quotaplane.server.main import build_scheduler

    await elector.leading.wait()
    text = options.config.read_text(encoding="utf-8") if options.config is not None else None
    scheduler = await asyncio.to_thread(build_scheduler, text, options.store or "sqlite:///quotaplane.db")
    try:
        tokens = load_tokens()
        rest = create_app(scheduler, tokens=tokens, loopback_only=not tokens)
        from quotaplane.kube.metrics import FrontCollector

        rest.state.service.metrics.registry.register(FrontCollector(
            api.stats, lambda: leading.controller.stats if leading.controller is not None else None))
        controller_options = dataclasses.replace(options.controller, timeouts_every=None)
        async with rest.router.lifespan_context(rest):   # the scheduling and timeouts loops
            leading.rest = rest
            leading.controller = Controller(scheduler, api, controller_options)
            await leading.controller.run()
    finally:
        leading.rest = None
        scheduler.close()


def serve_front(options: FrontOptions) -> int:
    """``quotaplane kube``: run the front; the process exit code."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # uvicorn re-raises the stop signal after its graceful shutdown; no-op handlers underneath let the
    # front release its Lease, close the store and exit 0 instead of dying by the signal.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    try:
        return asyncio.run(run_front(options))
    except QuotaplaneError as exc:      # bad input (an option, the configuration): its own words
        print(f"quotaplane kube: refusing to start: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:    # unreachable apiserver config, unreadable store …: said, not a traceback
        print(f"quotaplane kube: refusing to start: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
