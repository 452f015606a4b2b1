"""A kubeconfig the front cannot use is refused at start, naming the file, the context and the field.

Found as a new user would meet it: a server URL without a host ("https://:6443") ended the front with
"refusing to start: ValueError: base_url: …", a server that is no URL at all ("notaurl") let the front
start and retry its first list for ever, and a file with no ``clusters`` said only "KeyError: 'clusters'".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from quotaplane.errors import InputError
from quotaplane.kube.api import KubeApi, client_config

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).with_name("quotaplane"))


def _kubeconfig(tmp_path: Path, server: Any = "https://10.0.0.1:6443", **changes: Any) -> Path:
    conf: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config", "current-context": "dev",
        "clusters": [{"name": "lab", "cluster": {"server": server}}],
        "users": [{"name": "me", "user": {"token": "t"}}],
        "contexts": [{"name": "dev", "context": {"cluster": "lab", "user": "me"}}]}
    conf.update(changes)
    path = tmp_path / "kc.yaml"
    path.write_text(yaml.safe_dump(conf))
    return path


@pytest.mark.parametrize("server", ["https://:6443", "notaurl", "ftp://h:21", ""])
def test_a_server_that_is_no_http_url_names_file_context_cluster_and_field(tmp_path: Path,
                                                                            server: Any) -> None:
    path = _kubeconfig(tmp_path, server)
    with pytest.raises(InputError) as err:
        client_config(kubeconfig=str(path))
    message = str(err.value)
    assert message.startswith(f"kubeconfig {path}: ")
    assert "context 'dev'" in message and "cluster 'lab'" in message and "server" in message
    assert "https://10.0.0.1:6443" in message            # what a good one looks like


@pytest.mark.parametrize(("changes", "words"), [
    ({"clusters": None}, "clusters"),
    ({"contexts": "x"}, "contexts"),
    ({"current-context": "prod"}, "context 'prod'"),
    ({"current-context": None}, "current-context"),
    ({"contexts": [{"name": "dev", "context": {"cluster": "nope", "user": "me"}}]}, "cluster 'nope'"),
    ({"contexts": [{"name": "dev", "context": {"cluster": "lab", "user": "ghost"}}]}, "user 'ghost'"),
    ({"clusters": [{"name": "lab", "cluster": {"server": 6443}}]}, "server"),
])
def test_a_kubeconfig_missing_what_the_front_needs_says_which_part(tmp_path: Path, changes: dict[str, Any],
                                                                   words: str) -> None:
    path = _kubeconfig(tmp_path, **changes)
    with pytest.raises(InputError) as err:
        client_config(kubeconfig=str(path))
    assert str(err.value).startswith(f"kubeconfig {path}: ") and words in str(err.value)


def test_an_unreadable_or_malformed_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=f"kubeconfig {tmp_path / 'none.yaml'}: no such file"):
        client_config(kubeconfig=str(tmp_path / "none.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters: [\n")
    with pytest.raises(InputError, match=rf"kubeconfig {bad}: not YAML \(line 2"):
        client_config(kubeconfig=str(bad))
    bad.write_text("- a list\n")
    with pytest.raises(InputError, match=rf"kubeconfig {bad}: expected a mapping"):
        client_config(kubeconfig=str(bad))


def test_a_good_kubeconfig_still_reaches_its_server(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path, "https://10.0.0.1:6443/prefix")
    api = KubeApi(client_config(kubeconfig=str(path)))
    assert api.wire is not None and api.wire.host == "10.0.0.1" and api.wire.prefix == "/prefix"


def test_the_front_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path, "notaurl")
    out = subprocess.run([EXE, "kube", "--config", str(ROOT / "examples" / "queues.yaml"), "--port", "0",
                          "--kubeconfig", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    start = f"quotaplane kube: refusing to start: kubeconfig {path}: "
    assert len(lines) == 1 and lines[0].startswith(start), out.stderr
    assert "Traceback" not in out.stderr and "ValueError" not in out.stderr


def _with(tmp_path: Path, cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None) -> Path:
    return _kubeconfig(tmp_path, clusters=[{"name": "lab", "cluster": {"server": "https://10.0.0.1:6443",
                                                                      **(cluster or {})}}],
                       users=[{"name": "me", "user": user or {"token": "t"}}])


@pytest.mark.parametrize(("cluster", "user", "words"), [
    ({"server": "https://127.0.0.1:notaport"}, None, "server 'https://127.0.0.1:notaport': port"),
    ({"certificate-authority": "nope/ca.crt"}, None, "certificate-authority"),
    ({"certificate-authority-data": "%%%not base64"}, None, "certificate-authority-data"),
    (None, {"tokenFile": "/nonexistent/token"}, "tokenFile"),
    (None, {"client-certificate": "c.crt", "client-key": "c.key"}, "client-certificate"),
    (None, {"client-certificate-data": "!!", "client-key-data": "!!"}, "client-certificate-data"),
    (None, {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"}},
     "exec apiVersion client.authentication.k8s.io/v1"),
])
def test_what_the_client_would_fail_on_later_is_said_at_start(
        tmp_path: Path, cluster: dict[str, Any] | None, user: dict[str, Any] | None, words: str) -> None:
    """Found by a review: a bad port was 'InvalidURL', a missing certificate file a FileNotFoundError
    with no path, bad base64 'Error: Invalid base64-encoded string', and a missing token file or a v1
    exec plugin (which the client cannot run) let the front start and never become ready."""
    path = _with(tmp_path, cluster, user)
    with pytest.raises(InputError) as err:
        client_config(kubeconfig=str(path))
    message = str(err.value)
    assert message.startswith(f"kubeconfig {path}: ") and words in message, message


def test_files_a_kubeconfig_names_are_found_beside_it(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("x")
    (tmp_path / "token").write_text("t")
    path = _with(tmp_path, {"certificate-authority": "ca.crt"}, {"tokenFile": "token"})
    assert client_config(kubeconfig=str(path)) is not None
