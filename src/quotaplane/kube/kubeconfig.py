"""The kubeconfig the Kubernetes front talks to its API server with: an explicit server, a kubeconfig
file, or the environment — checked at start, so that what the client would fail on later (a server
that is no URL, a missing certificate or token file, an exec plug-in it cannot run) is one line naming
the file, the context and the field instead of a front that starts and never becomes ready."""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from lightkube import KubeConfig
from lightkube.core.exceptions import ConfigError as LightkubeConfigError

from quotaplane.errors import InputError

__all__ = ["client_config"]


def client_config(server: str | None = None, token: str | None = None, kubeconfig: str | None = None
                  ) -> KubeConfig:
    """The client's configuration: an explicit ``server`` (and bearer ``token``), a kubeconfig file, or
    the environment (in-cluster service account, then ``~/.kube/config``)."""
    if server is not None:
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(f"--kube-server: {server!r} is not an http(s) URL such as "
                             "https://10.0.0.1:6443 (the API server's address)")
        return KubeConfig.from_dict({
            "apiVersion": "v1", "kind": "Config", "current-context": "quotaplane",
            "clusters": [{"name": "quotaplane", "cluster": {"server": server.rstrip("/")}}],
            # lightkube needs a user entry even when the server wants no credentials
            "users": [{"name": "quotaplane", "user": {"token": token or "none"}}],
            "contexts": [{"name": "quotaplane", "context": {"cluster": "quotaplane", "user": "quotaplane"}}]})
    if kubeconfig is not None:
        return _checked(_read_kubeconfig(kubeconfig), f"kubeconfig {kubeconfig}")
    config = KubeConfig.from_env()
    return _checked(config, f"kubeconfig {config.fname}" if config.fname else "the in-cluster configuration")


def _read_kubeconfig(path: str) -> KubeConfig:
    """The file's configuration; its faults said as the file's, not as the YAML or lightkube exception
    under them (a bare ``KeyError: 'clusters'`` told a user nothing)."""
    where = f"kubeconfig {path}"
    file = Path(path).expanduser()
    try:
        text = file.read_text()
    except FileNotFoundError:
        raise InputError(f"{where}: no such file") from None
    except OSError as exc:
        raise InputError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise InputError(f"{where}: not YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping with clusters, contexts, users and current-context")
    for key in ("clusters", "contexts"):
        if not isinstance(data.get(key), list):
            raise InputError(f"{where}: {key}: expected a list of named entries")
    try:
        return KubeConfig.from_dict(data, fname=file)
    except (KeyError, TypeError, AttributeError, ValueError, LightkubeConfigError) as exc:  # msgspec's, too
        raise InputError(f"{where}: an entry of clusters, contexts or users is malformed ({exc})") from None


def _checked(config: KubeConfig, where: str) -> KubeConfig:
    """``config`` when its current context names a cluster whose ``server`` is an http(s) URL with a
    host; otherwise an error naming the context, the cluster and the field, before the front starts
    (a server of ``notaurl`` had the front retry its first list for ever)."""
    name = config.current_context
    if name is None:
        raise InputError(f"{where}: no current-context is set (kubectl config use-context NAME sets it)")
    context = config.contexts.get(name)
    if context is None:
        raise InputError(f"{where}: context {name!r} (the current-context) is not among its contexts")
    cluster = config.clusters.get(context.cluster)
    if cluster is None:
        raise InputError(f"{where}: context {name!r} names cluster {context.cluster!r}, which is not among "
                         "its clusters")
    if context.user and context.user not in config.users:
        raise InputError(f"{where}: context {name!r} names user {context.user!r}, which is not among its "
                         "users")
    server = cluster.server
    parts = urlsplit(server) if isinstance(server, str) else None
    at = f"{where}: context {name!r}, cluster {context.cluster!r}"
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{at}: server {server!r} is not an http(s) URL such as https://10.0.0.1:6443 (the "
                         "API server's address)")
    try:
        _ = parts.port              # urlsplit reads the port only when asked: a bad one raises here
    except ValueError as exc:
        raise InputError(f"{at}: server {server!r}: port {exc}") from None
    base = Path(config.fname).parent if config.fname else None
    _check_files(at, base, (("certificate-authority", cluster.certificate_auth),),
                 (("certificate-authority-data", cluster.certificate_auth_data),))
    user = config.users.get(context.user) if context.user else None
    if user is not None:
        at = f"{where}: context {name!r}, user {context.user!r}"
        _check_files(at, base, (("tokenFile", user.token_file), ("client-certificate", user.client_cert),
                                ("client-key", user.client_key)),
                     (("client-certificate-data", user.client_cert_data),
                      ("client-key-data", user.client_key_data)))
        if user.exec is not None and user.exec.apiVersion not in _EXEC_VERSIONS:
            raise InputError(f"{at}: exec apiVersion {user.exec.apiVersion} is not one the Kubernetes client "
                             f"here runs ({', '.join(_EXEC_VERSIONS)}); a token or a token file works too")
    return config


#: the exec credential plug-in versions lightkube runs (its ExecAuth)
_EXEC_VERSIONS = ("client.authentication.k8s.io/v1alpha1", "client.authentication.k8s.io/v1beta1")


def _check_files(at: str, base: Path | None, files: tuple[tuple[str, str | None], ...],
                 data: tuple[tuple[str, str | None], ...]) -> None:
    """Each file a kubeconfig names exists (a relative path is read beside the kubeconfig, as kubectl
    and lightkube read it) and each ``…-data`` field is base64, said at start rather than as a
    FileNotFoundError without a path, or a front that never becomes ready, once the client uses them."""
    for field, value in files:
        if value is None:
            continue
        path = Path(value).expanduser()
        if not path.is_absolute() and base is not None:
            path = base / path
        if not path.is_file():
            raise InputError(f"{at}: {field} {value!r}: no such file ({path})")
    for field, value in data:
        if value is None:
            continue
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise InputError(f"{at}: {field} is not base64 (kubectl writes it base64-encoded)") from None
