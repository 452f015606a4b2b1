"""The quotaplane REST service (FastAPI + uvicorn).

``create_app(scheduler, tokens=…)`` builds the ASGI app; ``serve(config, store, host, port)`` runs it
(``quotaplane serve``). Endpoints: docs/rest.md; operations (stores, tokens, metrics, fail-over):
docs/operations.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["create_app", "serve"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from quotaplane.server.app import create_app

        return create_app
    if name == "serve":
        from quotaplane.server.main import serve

        return serve
    raise AttributeError(f"module 'quotaplane.server' has no attribute {name!r}")


if TYPE_CHECKING:  # pragma: no cover
    from quotaplane.server.app import create_app
    from quotaplane.server.main import serve
