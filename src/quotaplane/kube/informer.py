"""List, then watch, one kind — client-go's reflector, as the front needs it.

A watch resumes from the last resourceVersion it saw: an object's, or a ``BOOKMARK``'s (asked for on
every watch, so a kind that seldom changes still resumes from a recent version instead of one the
server has let go). When the server ends a watch (its timeout), the next one starts from there — no
relist, nothing missed, nothing replayed. Only ``410 Expired`` (the version left the server's window:
an apiserver restart, a long outage) lists again, and the listing replaces what was known
(``resync``). Any other failure is retried with the API's retry policy, then again after a capped
backoff, from the same version.

A kind can be narrowed to a namespace and a field selector (the ConfigMap the front reads: one object,
not every ConfigMap of the cluster).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from quotaplane.kube.api import ApiCallError, KubeApi
from quotaplane.kube.objects import mapping

__all__ = ["Informer"]

log = logging.getLogger("quotaplane.kube.informer")

Handler = Callable[[str, dict[str, Any]], Awaitable[None]]
Resync = Callable[[list[dict[str, Any]]], Awaitable[None]]


class Informer:
    """One kind, listed and followed (see the module docstring)."""

    def __init__(self, api: KubeApi, kind: str, *, namespace: str | None = None,
                 fields: Mapping[str, str] | None = None, error: Callable[[str], None] | None = None,
                 max_backoff: float = 30.0) -> None:
        self.api = api
        self.kind = kind
        self.namespace = namespace
        self.fields = dict(fields) if fields else None
        self._error = error or (lambda text: log.warning("%s", text))
        self.max_backoff = max_backoff
        #: where the next watch starts (None: list first)
        self.version: str | None = None
        #: listings made (the first one included) and watches started: what a test of the noise counts
        self.lists = 0
        self.watches = 0
        self._rng = random.Random()

    async def list(self) -> list[dict[str, Any]]:
        """One listing (retried by the API's policy); the watch resumes from its version."""
        items, version = await self.api.list_versioned(self.kind, namespace=self.namespace,
                                                       fields=self.fields)
        self.lists += 1
        self.version = version
        return items

    async def run(self, handle: Handler, resync: Resync) -> None:
        """Follow the kind for ever: ``handle(type, object)`` per event (bookmarks only move the
        version), ``resync(items)`` after a relisting. :meth:`list` must have run once."""
        failures = 0
        while True:
            try:
                if self.version is None:
                    await resync(await self.list())
                self.watches += 1
                async for event_type, obj in self.api.watch(self.kind, self.version, namespace=self.namespace,
                                                            fields=self.fields):
                    version = mapping(obj.get("metadata")).get("resourceVersion")
                    if event_type != "BOOKMARK":
                        await handle(event_type, obj)
                    if isinstance(version, str) and version:
                        self.version = version
                    failures = 0
                failures = 0            # the server ended the watch (its timeout): resume from here
            except asyncio.CancelledError:
                raise
            except ApiCallError as exc:
                if exc.code == 410:     # the version is gone: list again (not a failure)
                    log.info("%s: %s; listing again", self.kind, exc.message)
                    self.version = None
                    continue
                failures += 1
                self._error(f"watch {self.kind}: {exc}")
                await asyncio.sleep(self._backoff(failures))
            except Exception as exc:    # a handler's failure must not stop the watch
                failures += 1
                self._error(f"watch {self.kind}: {type(exc).__name__}: {exc}")
                await asyncio.sleep(self._backoff(failures))

    def _backoff(self, failures: int) -> float:
        return float(self._rng.uniform(0.5, 1.0) * min(self.max_backoff, 0.5 * 2.0 ** min(failures, 10)))
