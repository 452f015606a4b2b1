"""The ``quotaplane`` command line: a thin layer over the library.

``quotaplane validate FILE...`` checks queue configurations; ``quotaplane serve`` runs the REST
service. Each command delegates to the package that owns the work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="quotaplane: the quota engine for shared clusters.")


@app.command()
def validate(files: Annotated[list[Path], typer.Argument(help="Queue configuration YAML files.")]) -> None:
    """Validate queue configuration files; print FILE:LINE: reason per problem; exit 1 if any."""
    from quotaplane.config.files import validate_files

    ok, lines = validate_files(files)
    for line in lines:
        typer.echo(line, err=not ok)
    raise typer.Exit(0 if ok else 1)


@app.command()
def serve(
    config: Annotated[Path | None, typer.Option(help="Queue configuration YAML file.")] = None,
    store: Annotated[str | None, typer.Option(help="sqlite:///path.db or postgresql://user@host/db.")] = None,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 9080,
) -> None:
    """Run the REST service (YuniKorn-compatible endpoints under /ws/v1/)."""
    from quotaplane.server.main import serve as _serve

    raise typer.Exit(_serve(config=config, store=store, host=host, port=port))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
