"""The small error paths a new user hits (issue 30 #7): one line that names the file, no errno."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from quotaplane.errors import InputError
from quotaplane.kube.api import client_config

ROOT = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).with_name("quotaplane"))


def test_simulate_names_a_missing_trace_or_config(tmp_path: Path) -> None:
    for args, missing in ((["--config", str(ROOT / "examples" / "trace-queues.yaml"), "--trace",
                            str(tmp_path / "nope.jsonl")], tmp_path / "nope.jsonl"),
                          (["--config", str(tmp_path / "nope.yaml"), "--trace",
                            str(ROOT / "examples" / "trace.jsonl")], tmp_path / "nope.yaml")):
        out = subprocess.run([EXE, "simulate", *args], capture_output=True, text=True, timeout=120)
        assert out.returncode == 1
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and str(missing) in lines[0] and "Errno" not in lines[0], out.stderr


def test_validate_names_a_missing_file_without_a_line(tmp_path: Path) -> None:
    out = subprocess.run([EXE, "validate", str(tmp_path / "nope.yaml")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip() == f"{tmp_path / 'nope.yaml'}: cannot read file: No such file or directory"


def test_serve_partitions_on_sqlite_says_what_is_wrong_and_what_to_do(tmp_path: Path) -> None:
    """Found trying the product as a new user: ``serve --partitions default`` on SQLite printed
    "refusing to start: ValueError: …" after binding the port and opening nothing useful."""
    db = tmp_path / "q.db"
    out = subprocess.run([EXE, "serve", "--partitions", "default", "--store", f"sqlite:///{db}",
                          "--port", "0"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "ValueError" not in lines[0], out.stderr
    assert "--partitions" in lines[0] and "PostgreSQL" in lines[0] and f"sqlite:///{db}" in lines[0]
    assert "leave --partitions out" in lines[0] and "--store postgresql://" in lines[0]
    assert not db.exists()                      # refused before the store is touched


def test_kube_refuses_a_kube_server_that_is_not_a_url(tmp_path: Path) -> None:
    """Found trying the product as a new user: ``kube --kube-server notaurl`` started and retried every
    list for ever ("Request URL is missing an 'http://' or 'https://' protocol")."""
    out = subprocess.run([EXE, "kube", "--kube-server", "notaurl", "--store", f"sqlite:///{tmp_path}/k.db"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Error" not in lines[0], out.stderr
    assert "--kube-server" in lines[0] and "'notaurl'" in lines[0] and "https://" in lines[0], out.stderr


def test_client_config_names_a_server_that_is_not_a_url() -> None:
    for bad in ("notaurl", "ftp://host", "https://", ""):
        with pytest.raises(InputError, match="--kube-server") as err:
            client_config(server=bad)
        assert isinstance(err.value, ValueError) and repr(bad) in str(err.value)
    assert client_config(server="https://10.0.0.1:6443/") is not None


@pytest.mark.parametrize(("store", "said"), [
    ("bogus", "bad store URL 'bogus'"), ("mysql://x/y", "unknown store URL scheme 'mysql'"),
    ("sqlite:////nonexistent/dir/x.db", "directory '/nonexistent/dir' does not exist")])
def test_serve_says_a_bad_store_in_its_own_words(tmp_path: Path, store: str, said: str) -> None:
    """"refusing to start: InputError: bad store URL …": the class name told a user nothing."""
    out = subprocess.run([EXE, "serve", "--store", store, "--port", "0"], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Error:" not in lines[0] and said in lines[0], out.stderr
    assert lines[0].startswith("quotaplane: refusing to start: --store: "), out.stderr


def test_simulate_refuses_an_out_that_is_a_file_before_running(tmp_path: Path) -> None:
    """Found trying the product as a new user: ``simulate --out`` naming a file ran the whole trace,
    then printed "[Errno 17] File exists: …"."""
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    out = subprocess.run([EXE, "simulate", "--config", str(ROOT / "examples" / "trace-queues.yaml"),
                          "--trace", str(ROOT / "examples" / "trace.jsonl"), "--out", str(taken)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Errno" not in lines[0], out.stderr
    assert f"--out {taken}" in lines[0] and "not a directory" in lines[0], out.stderr
    assert taken.read_text() == "mine\n"


def test_serve_refuses_a_configuration_whose_window_would_open_to_an_invalid_one(tmp_path: Path) -> None:
    """Found trying the product as a new user: such a configuration started, and at the window's
    edge the change was refused at every tick (a traceback in the log each time)."""
    config = tmp_path / "q.yaml"
    config.write_text("partitions:\n- name: default\n  queues:\n  - name: root\n    queues:\n"
                      "    - name: a\n      resources: {max: {vcore: 2}}\n"
                      "  windows:\n  - {name: z, queue: root.a, from: '2026-12-28T00:00', "
                      "to: '2026-12-30T00:00', guaranteed: {vcore: 8}}\n")
    db = tmp_path / "q.db"
    out = subprocess.run([EXE, "serve", "--config", str(config), "--store", f"sqlite:///{db}", "--port", "0"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith(f"{config}: windows[0] (z): the configuration with it open is invalid: "), out
    assert "guaranteed" in lines[0] and "refusing to start" in lines[-1] and "Traceback" not in out.stderr
    assert not db.exists()


@pytest.mark.parametrize("plugins", ["nosuchmod", "/nonexistent/plugin.py"])
def test_a_bad_plugins_variable_is_one_line_not_a_traceback(plugins: str) -> None:
    """Found by a review: a QUOTAPLANE_PLUGINS naming nothing loadable ended ``validate`` (and
    ``serve``) with a 156-line traceback, its last line the clear message."""
    import os

    env = {**os.environ, "QUOTAPLANE_PLUGINS": plugins}
    out = subprocess.run([EXE, "validate", str(ROOT / "examples" / "queues.yaml")], capture_output=True,
                         text=True, timeout=60, env=env)
    assert out.returncode == 1, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("quotaplane: QUOTAPLANE_PLUGINS: "), out.stderr
    assert plugins in lines[0] and "Traceback" not in out.stderr
