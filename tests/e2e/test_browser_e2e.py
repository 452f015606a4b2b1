"""``quotaplane serve``'s browser safety and limit options, end to end (issue 32 items 7 and 10).

The issue's reproduction: without tokens, a cross-site POST created an application, and ``PUT
/ws/v1/config`` with ``Host: evil.example`` answered 200.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import httpx

from tests.e2e.conftest import CONFIG, ROOT, ServerProcess

APP = {"applicationID": "csrf", "queue": "root.default", "user": "eve"}


def _apps(server: ServerProcess) -> list[str]:
    with server.client() as c:
        return [a["applicationID"] for a in c.get("/ws/v1/partition/default/applications").json()]


def test_without_tokens_only_loopback_hosts_and_own_pages_may_change_anything(tmp_path: Path,
                                                                               config_file: Path) -> None:
    server = ServerProcess(config=config_file, store=f"sqlite:///{tmp_path}/s.db", cwd=tmp_path).start()
    try:
        with server.client() as c:
            before = c.get("/ws/v1/config").text
            r = c.put("/ws/v1/config", content=CONFIG.replace("small", "smaller"),
                      headers={"Host": "evil.example", "Content-Type": "application/x-yaml"})
            assert r.status_code == 403 and "not allowed" in r.json()["message"]
            assert c.get("/ws/v1/config").text == before
            # what a hostile page can send without a preflight
            r = c.post("/ws/v1/partition/default/applications", content=httpx.Request(
                "POST", "/", json=APP).content, headers={"Content-Type": "text/plain;charset=UTF-8",
                                                          "Origin": "https://evil.example"})
            assert r.status_code == 403
            r = c.post("/ws/v1/partition/default/applications", json=APP,
                       headers={"Origin": "https://evil.example"})
            assert r.status_code == 403
            r = c.post("/ws/v1/partition/default/applications", content=b'{"applicationID": "x"}',
                       headers={"Content-Type": "text/plain"})
            assert r.status_code == 415
            assert "csrf" not in _apps(server)
            assert "access-control-allow-origin" not in c.get("/ws/v1/partitions").headers
            # its own page, by any loopback name
            for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}"):
                r = c.post("/ws/v1/partition/default/applications", json={**APP, "applicationID": host},
                           headers={"Host": host, "Origin": f"http://{host}"})
                assert r.status_code == 201, r.text
    finally:
        server.stop()


def test_allowed_hosts_and_origins_options(tmp_path: Path, config_file: Path) -> None:
    server = ServerProcess(config=config_file, store=f"sqlite:///{tmp_path}/s.db", cwd=tmp_path,
                           extra_args=["--allowed-hosts", "quota.internal,localhost",
                                       "--allowed-origins", "http://ui.internal:4200"],
                           env={"QUOTAPLANE_MAX_BATCH": "2"}).start()
    try:
        with server.client() as c:
            assert c.get("/ws/v1/partitions", headers={"Host": "quota.internal"}).status_code == 200
            # the list replaces the default: 127.0.0.1 is no longer in it (probes answer any Host)
            assert c.get("/ws/v1/partitions").status_code == 403
            assert c.get("/healthz").status_code == 200
            r = c.get("/ws/v1/partitions", headers={"Host": "localhost", "Origin": "http://ui.internal:4200"})
            assert r.headers["access-control-allow-origin"] == "http://ui.internal:4200"
            r = c.post("/ws/v1/partition/default/allocations/batch", headers={"Host": "localhost"},
                       json={"allocations": [{"applicationID": "a", "allocationKey": f"k{i}",
                                              "resource": {"vcore": 1}} for i in range(3)]})
            assert r.status_code == 413 and "max-batch" in r.json()["message"]
    finally:
        server.stop()


def test_with_tokens_any_host(tmp_path: Path, config_file: Path) -> None:
    token = "admin-token-0123456789"
    server = ServerProcess(config=config_file, store=f"sqlite:///{tmp_path}/s.db", cwd=tmp_path,
                           env={"QUOTAPLANE_TOKENS": f"admin={token}"}).start()
    try:
        with server.client(token) as c:
            assert c.get("/ws/v1/partitions", headers={"Host": "quota.example.com"}).status_code == 200
            r = c.post("/ws/v1/partition/default/applications", json=APP, headers={"Origin": "https://evil.example"})
            assert r.status_code == 403
    finally:
        server.stop()


def _serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
           preexec: object = None) -> subprocess.CompletedProcess[str]:
    probe = ServerProcess(config=None, store=f"sqlite:///{tmp_path}/s.db", cwd=tmp_path, env=env)
    return subprocess.run([sys.executable, "-m", "quotaplane.cli", "serve", "--store", probe.store,
                           "--port", str(probe.port), *args], cwd=tmp_path, env=probe.env,
                          capture_output=True, text=True, timeout=120, preexec_fn=preexec)  # type: ignore[arg-type]


def test_a_wrong_limit_or_host_refuses_to_start(tmp_path: Path) -> None:
    r = _serve(tmp_path, "--limit", "max-body-bytes=lots")
    assert r.returncode == 2 and "--limit max-body-bytes: 'lots' is not a size" in r.stderr
    r = _serve(tmp_path, env={"QUOTAPLANE_HEADER_TIMEOUT": "soon"})
    assert r.returncode == 2 and "QUOTAPLANE_HEADER_TIMEOUT" in r.stderr
    r = _serve(tmp_path, "--allowed-hosts", "http://x")
    assert r.returncode == 2 and "allowed host" in r.stderr


def test_max_connections_beyond_the_open_files_limit_refuses_to_start(tmp_path: Path) -> None:
    """The process would run out of descriptors before its connection limit: the slowloris case."""
    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    r = _serve(tmp_path, "--limit", "max-connections=5000", preexec=low)
    assert r.returncode == 2, r.stderr
    assert "max-connections 5000 needs an open-files limit of at least 5256 (it is 1024)" in r.stderr
    assert ROOT.exists()
