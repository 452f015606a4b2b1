"""The ``quotaplane`` console script: the CLI, or a clear word when an optional extra is not installed.

The command line (typer, rich) is the ``cli`` extra, the service (FastAPI, uvicorn, prometheus-client)
the ``server`` extra, the REST client (httpx) the ``client`` extra, the simulator's plot (matplotlib)
the ``sim`` extra, the PostgreSQL store (psycopg) the ``postgres`` extra and the Kubernetes front
(lightkube) the ``kube`` extra. A missing one ends the command with the ``pip install`` line that
brings it, instead of a traceback.
"""

from __future__ import annotations

import sys

__all__ = ["EXTRAS", "main", "missing_extra"]

#: top-level module -> the extra that installs it
EXTRAS: dict[str, str] = {
    "typer": "cli", "rich": "cli", "click": "cli",
    "fastapi": "server", "starlette": "server", "uvicorn": "server", "prometheus_client": "server",
    "httpx": "client", "matplotlib": "sim", "psycopg": "postgres", "lightkube": "kube",
}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The message for a missing optional dependency, or None when ``exc`` is about something else."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return (f"quotaplane: this needs the '{extra}' extra, which is not installed (module {top!r} is "
            f"missing): pip install 'quotaplane[{extra}]'")


def main() -> None:
    """Console-script entry point."""
    from quotaplane.errors import QuotaplaneError

    try:
        from quotaplane.cli import app

        app()
    except ModuleNotFoundError as exc:
        message = missing_extra(exc)
        if message is None:
            raise
        print(message, file=sys.stderr)
        raise SystemExit(2) from None
    except QuotaplaneError as exc:
        # bad input no command caught as its own (QUOTAPLANE_PLUGINS naming nothing loadable): its
        # words in one line, not the traceback that ends with them
        print(f"quotaplane: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
