"""The kmock emulator on loopback in a thread of its own, with the workarounds the reference lists
(kubernetes-front.md §7): the Namespace resource made addressable, and the Eviction subresource (which
kmock lacks) answered the way the apiserver does — the pod is deleted."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from typing import Any

import aiohttp
import kmock

_EVICTION = re.compile(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction$")


def _patch_namespace_parsing() -> None:
    from kmock._internal import parsing

    if getattr(parsing.parse_path, "_quotaplane", False):
        return
    orig = parsing.parse_path

    def fixed(path: str) -> Any:
        p = path.strip("/").split("/")
        addressed = len(p) <= 4 or (len(p) == 5 and p[4] in ("status", "finalize"))
        if p[:3] == ["api", "v1", "namespaces"] and addressed:
            return parsing.ParsedPath("", "v1", "namespaces", None, p[3] if len(p) > 3 else None,
                                      p[4] if len(p) > 4 else None)
        return orig(path)

    fixed._quotaplane = True  # type: ignore[attr-defined]
    parsing.parse_path = fixed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Recent(list):  # type: ignore[type-arg]
    """kmock's log of every request, kept to the newest ones.

    kmock matches each request against its routes by scanning the whole log (``request in view``):
    with every request kept, a run of n requests costs O(n²) — 1,000 pods took minutes. Only the
    requests the eviction route must still match need to stay: eviction requests (rare; matched some
    awaits after they are logged, so they are never dropped) and the newest others.
    """

    KEEP = 8

    def append(self, item: Any) -> None:
        super().append(item)
        if len(self) > 2 * self.KEEP:
            old = [r for r in self[:-self.KEEP] if _EVICTION.search(str(getattr(r.url, "path", "")))]
            self[:] = [*old, *self[-self.KEEP:]]


class Emulator:
    """kmock serving the kinds the front uses; ``url`` for clients, ``objects`` to seed and inspect."""

    def __init__(self, crds: bool = True) -> None:
        #: serve ElasticQuota and QuotaSubtree (their CRDs installed)
        self.crds = crds
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ready = threading.Event()
        self.k: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.evictions: list[tuple[str, str]] = []

    def start(self) -> Emulator:
        _patch_namespace_parsing()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "kmock did not start"
        return self

    def _run(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        async with kmock.KubernetesEmulator() as k, kmock.Server(k, host="127.0.0.1", port=self.port):
            for path, kind, namespaced in [
                    ("v1/pods", "Pod", True), ("v1/nodes", "Node", False),
                    ("v1/namespaces", "Namespace", False), ("v1/configmaps", "ConfigMap", True),
                    ("v1/events", "Event", True), ("coordination.k8s.io/v1/leases", "Lease", True),
                    ("scheduling.sigs.k8s.io/v1alpha1/elasticquotas", "ElasticQuota", True),
                    ("quota.codeflare.dev/v1alpha1/quotasubtrees", "QuotaSubtree", True)]:
                if not self.crds and "." in path.split("/")[0]  and "coordination" not in path:
                    continue
                k.resources[path] = kmock.ResourceInfo(kind=kind, namespaced=namespaced)
            k["post", re.compile(r".*/pods/[^/]+/eviction$")] << self._evict
            object.__setattr__(k, "_requests", _Recent())
            self.k = k
            self.ready.set()
            await self._stop.wait()

    async def _evict(self, request: Any) -> Any:
        m = _EVICTION.search(request.url.path)
        assert m is not None
        ns, name = m.group(1), m.group(2)
        self.evictions.append((ns, name))
        async with aiohttp.ClientSession() as s, \
                s.delete(f"{self.url}/api/v1/namespaces/{ns}/pods/{name}") as r:
            await r.read()
        return {"apiVersion": "v1", "kind": "Status", "status": "Success"}

    def call(self, fn: Any) -> Any:
        """Run ``fn()`` on the emulator's loop (object changes that must emit watch events)."""
        assert self.loop is not None
        done = threading.Event()
        out: list[Any] = []

        def run() -> None:
            out.append(fn())
            done.set()
        self.loop.call_soon_threadsafe(run)
        done.wait(5)
        return out[0] if out else None

    def stop(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(5)
