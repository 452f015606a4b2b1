"""The ``quotaplane`` command line: a thin layer over the library.

``quotaplane validate FILE...`` checks queue configurations; ``quotaplane serve`` runs the REST
service; ``quotaplane kube`` runs the Kubernetes front; ``queues``, ``usage``, ``apps``, ``asks``,
``whatif``, ``events`` and ``config`` ask a running service (:mod:`quotaplane.cli_remote`). Each command
delegates to the package that owns the work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(add_completion=True, no_args_is_help=True, rich_markup_mode="markdown",
                  help="quotaplane: the quota engine for shared clusters.")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"quotaplane {version('quotaplane')}")
        except PackageNotFoundError:      # run from a source tree that is not installed
            from quotaplane import __version__

            typer.echo(f"quotaplane {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                               help="Print the version and exit.")] = False) -> None:
    """quotaplane: the quota engine for shared clusters."""


@app.command()
def validate(files: Annotated[list[Path], typer.Argument(help="Queue configuration YAML files.")]) -> None:
    """Validate queue configuration files; print FILE:LINE: reason per problem; exit 1 if any."""
    from quotaplane.config.files import validate_files

    ok, lines = validate_files(files)
    for line in lines:
        typer.echo(line, err=not ok)
    raise typer.Exit(0 if ok else 1)


@app.command("from-kueue")
def from_kueue(file: Annotated[Path, typer.Argument(help="Kueue objects (ResourceFlavor, ClusterQueue, "
                                                     "Cohort, LocalQueue) in YAML.")],
               partition: Annotated[str, typer.Option(help="The partition they become.")] = "default",
               ) -> None:
    """Print the queue YAML Kueue's objects map to (docs/from-kueue.md); serve, validate and simulate read
    such a file directly. Each problem: FILE:LINE: reason, exit 1."""
    from quotaplane.config.kueue import kueue_to_yaml
    from quotaplane.errors import ConfigError

    try:
        typer.echo(kueue_to_yaml(file.read_text(encoding="utf-8"), partition), nl=False)
    except (OSError, UnicodeDecodeError) as exc:
        typer.echo(f"{file}: cannot read file: {exc}", err=True)
        raise typer.Exit(1) from None
    except ConfigError as err:
        for line, reason in err.problems:
            typer.echo(f"{file}:{line}: {reason}" if line else f"{file}: {reason}", err=True)
        raise typer.Exit(1) from None


@app.command()
def serve(
    config: Annotated[Path | None, typer.Option(help="Queue configuration YAML file.",
                                                envvar="QUOTAPLANE_CONFIG")] = None,
    store: Annotated[str | None, typer.Option(help="sqlite:///path.db or postgresql://user@host/db.",
                                              envvar="QUOTAPLANE_STORE")] = None,
    host: Annotated[str, typer.Option(help="Address to bind.", envvar="QUOTAPLANE_HOST")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.", envvar="QUOTAPLANE_PORT", min=0, max=65535)
                    ] = 9080,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.",
                                           envvar="QUOTAPLANE_LOG_LEVEL")] = "warning",
    log_format: Annotated[str, typer.Option(help="text, or json (one object per line).",
                                            envvar="QUOTAPLANE_LOG_FORMAT")] = "text",
    access_log: Annotated[bool, typer.Option(help="Log one line per request.",
                                             envvar="QUOTAPLANE_ACCESS_LOG")] = False,
    group_commit: Annotated[bool, typer.Option(
        help="Commit concurrent changes of a partition together (each answer still waits for its "
             "commit).", envvar="QUOTAPLANE_GROUP_COMMIT")] = True,
    partitions: Annotated[str | None, typer.Option(
        help="PostgreSQL: lead only these partitions (comma-separated; '' or '*': every free one) and "
             "follow the others, so several instances share the partitions.",
        envvar="QUOTAPLANE_PARTITIONS")] = None,
    anonymous_read: Annotated[bool, typer.Option(
        "--anonymous-read", help="With tokens: let requests without a token read (every GET, validate-conf, "
             "whatif), so YuniKorn's web UI, Prometheus and the admission controller need none. Writes "
             "still need a token.", envvar="QUOTAPLANE_ANONYMOUS_READ")] = False,
    limit: Annotated[list[str] | None, typer.Option(
        help="NAME=VALUE: a limit of what clients may hold (repeatable; max-body-bytes, max-batch, "
             "header-timeout, … — docs/operations.md 'Limits'; also the environment, e.g. "
             "QUOTAPLANE_MAX_BODY_BYTES).")] = None,
    allowed_hosts: Annotated[str | None, typer.Option(
        help="Host header values served (comma-separated names, addresses, networks, *.domain or *); "
             "default: loopback names without tokens, any with tokens.",
        envvar="QUOTAPLANE_ALLOWED_HOSTS")] = None,
    allowed_origins: Annotated[str | None, typer.Option(
        help="Origins (scheme://host:port, comma-separated) besides the service's own whose pages may "
             "send changes and read answers (CORS); '*': any.", envvar="QUOTAPLANE_ALLOWED_ORIGINS")] = None,
) -> None:
    """Run the REST service (YuniKorn-compatible endpoints under /ws/v1/). Every option can also be
    given by its environment variable (QUOTAPLANE_CONFIG, QUOTAPLANE_STORE, …)."""
    from quotaplane.server.main import serve as _serve

    raise typer.Exit(_serve(config=config, store=store, host=host, port=port, log_level=log_level,
                            log_format=log_format, access_log=access_log, group_commit=group_commit,
                            partitions=_partition_list(partitions), anonymous_read=anonymous_read,
                            limits=limit or (),
                            allowed_hosts=None if allowed_hosts is None else allowed_hosts.split(","),
                            allowed_origins=None if allowed_origins is None else allowed_origins.split(",")))


def _partition_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [] if text.strip() in ("", "*") else [p.strip() for p in text.split(",") if p.strip()]


@app.command()
def kube(
    config: Annotated[Path | None, typer.Option(help="Queue configuration YAML file (else the ConfigMap).")
                      ] = None,
    store: Annotated[str | None, typer.Option(help="sqlite:///path.db or postgresql://user@host/db.")] = None,
    host: Annotated[str, typer.Option(help="Address to bind (webhooks and REST).")] = "0.0.0.0",
    port: Annotated[int, typer.Option(help="Port to bind.", min=0, max=65535)] = 9443,
    tls_cert: Annotated[Path | None, typer.Option(help="PEM certificate for HTTPS (webhooks need it).")
                        ] = None,
    tls_key: Annotated[Path | None, typer.Option(help="PEM private key for HTTPS.")] = None,
    namespace: Annotated[str, typer.Option(help="The front's namespace (ConfigMap, Lease).")
                         ] = "quotaplane-system",
    partition: Annotated[str, typer.Option(help="The partition pods are admitted to.")] = "default",
    lease_name: Annotated[str, typer.Option(help="The Lease that elects one active controller.")
                          ] = "quotaplane-front",
    process_namespace: Annotated[list[str] | None, typer.Option(
        help="Regex of namespaces whose pods are gated (repeatable; none: all).")] = None,
    bypass_namespace: Annotated[list[str] | None, typer.Option(
        help="Regex of namespaces never gated (repeatable).")] = None,
    kube_server: Annotated[str | None, typer.Option(help="API server URL (default: in-cluster, kubeconfig).")
                           ] = None,
    kubeconfig: Annotated[str | None, typer.Option(help="kubeconfig file.")] = None,
    device_class: Annotated[list[str] | None, typer.Option(
        help="CLASS=RESOURCE: a DRA DeviceClass's devices count as RESOURCE (Kueue's deviceClassMappings; "
             "repeatable). Set, pods' resource claims are charged from their ResourceClaimTemplates.")
    ] = None,
) -> None:
    """Run the Kubernetes front: admission webhooks, leader election, controller and REST service."""
    from quotaplane.kube.controller import ControllerOptions
    from quotaplane.kube.main import FrontOptions, serve_front
    from quotaplane.kube.webhook import WebhookOptions

    if (tls_cert is None) != (tls_key is None):
        typer.echo("quotaplane kube: --tls-cert and --tls-key go together", err=True)
        raise typer.Exit(2)
    classes: dict[str, str] = {}
    for item in device_class or ():
        name, sep, resource = item.partition("=")
        if not sep or not name.strip() or not resource.strip():
            typer.echo(f"quotaplane kube: --device-class {item!r}: expected CLASS=RESOURCE", err=True)
            raise typer.Exit(2)
        classes[name.strip()] = resource.strip()
    webhook = WebhookOptions(process_namespaces=tuple(process_namespace or ()),
                             bypass_namespaces=tuple(bypass_namespace or ("^kube-system$",)))
    raise typer.Exit(serve_front(FrontOptions(
        config=config, store=store, host=host, port=port, tls_cert=tls_cert, tls_key=tls_key,
        namespace=namespace, lease_name=lease_name, kube_server=kube_server, kubeconfig=kubeconfig,
        controller=ControllerOptions(partition=partition, config_namespace=namespace,
                                     device_classes=classes or None), webhook=webhook)))


def _register_simulate() -> None:
    from quotaplane.sim.command import register

    register(app)


_register_simulate()


def _register_client_commands() -> None:
    from quotaplane.cli_remote import register

    register(app)


_register_client_commands()
__import__("quotaplane.cli_eta").cli_eta.register(app)           # `quotaplane eta`, `whatif` (docs/eta.md)
__import__("quotaplane.cli_report").cli_report.register(app)     # `quotaplane report` (docs/history.md)
__import__("quotaplane.cli_budgets").cli_budgets.register(app)   # `quotaplane budgets` (docs/budgets.md)

if __name__ == "__main__":  # pragma: no cover  (the console script is quotaplane.console:main)
    app()
