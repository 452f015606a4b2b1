"""End-to-end: the real ``quotaplane serve`` process over HTTP (tokens, ACLs, reload, restart)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import CONFIG, ServerProcess, free_port

ADMIN, SUBMIT, READ = "adm1n-0123456789abc", "subm1t-0123456789abc", "r3ad-0123456789abc"
TOKENS = f"admin={ADMIN},submit={SUBMIT},read={READ}"


def test_invalid_config_refuses_to_start_with_the_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.replace("name: small", "name: sm all"))
    port = free_port()
    proc = subprocess.run([sys.executable, "-m", "quotaplane.cli", "serve", "--config", str(bad),
                           "--store", "sqlite:///state.db", "--port", str(port)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert f"{bad}:" in proc.stderr
    assert "refusing to start" in proc.stderr


def test_no_tokens_refuses_a_non_loopback_address(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "quotaplane.cli", "serve", "--host", "0.0.0.0",
                           "--port", str(free_port()), "--store", "sqlite:///s.db"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parents[2] / "src")})
    assert proc.returncode == 2
    assert "no tokens" in proc.stderr


def test_default_store_is_sqlite_under_the_cwd(tmp_path: Path, servers: list[ServerProcess],
                                               config_file: Path) -> None:
    s = ServerProcess(config=config_file, store="", cwd=tmp_path)
    s.args = lambda: [sys.executable, "-m", "quotaplane.cli", "serve", "--config", str(config_file),
                      "--port", str(s.port)]  # type: ignore[method-assign]
    servers.append(s.start())
    with s.client() as c:
        r = c.put("/ws/v1/partition/default/node/n1", json={"capacity": {"vcore": 1000}})
        assert r.status_code == 201
    assert s.stop() == 0
    assert (tmp_path / "quotaplane.db").exists()


def test_tokens_acls_and_every_endpoint_over_http(tmp_path: Path, servers: list[ServerProcess],
                                                  config_file: Path) -> None:
    s = ServerProcess(config=config_file, store="sqlite:///state.db", cwd=tmp_path,
                      env={"QUOTAPLANE_TOKENS": TOKENS})
    servers.append(s.start())
    with s.client() as anon, s.client(ADMIN) as admin, s.client(SUBMIT) as submit, s.client(READ) as read:
        # tokens: every write refuses a missing or wrong token, and a weaker role
        node = {"capacity": {"vcore": 16000, "memory": 2**34}}
        assert anon.put("/ws/v1/partition/default/node/n1", json=node).status_code == 401
        assert submit.put("/ws/v1/partition/default/node/n1", json=node).status_code == 403
        assert admin.put("/ws/v1/partition/default/node/n1", json=node).status_code == 201
        app = {"applicationID": "a1", "user": "alice", "queue": "root.restricted"}
        assert read.post("/ws/v1/partition/default/applications", json=app).status_code == 403
        assert anon.post("/ws/v1/partition/default/applications", json=app).status_code == 401
        r = submit.post("/ws/v1/partition/default/applications", json=app)
        assert r.status_code == 201 and r.json()["queueName"] == "root.restricted"
        # queue ACL: mallory may not submit to root.restricted
        r = submit.post("/ws/v1/partition/default/applications",
                        json={"applicationID": "m1", "user": "mallory", "queue": "root.restricted"})
        assert r.status_code == 403 and set(r.json()) >= {"status_code", "message", "description"}
        alloc = {"applicationID": "a1", "allocationKey": "k1", "resource": {"vcore": 1000}}
        assert read.post("/ws/v1/partition/default/allocations", json=alloc).status_code == 403
        r = submit.post("/ws/v1/partition/default/allocations", json=alloc)
        assert r.status_code == 201 and r.json()["allocated"] is True
        big = {"applicationID": "a1", "allocationKey": "k2", "resource": {"vcore": 10**9}}
        r = submit.post("/ws/v1/partition/default/allocations", json=big)
        assert r.status_code == 409 and r.json()["reasons"][0]["code"] == "root.capacity"
        r = read.post("/ws/v1/partition/default/whatif",
                      json={"applicationID": "a1", "resource": {"vcore": 1}})
        assert r.status_code == 200 and r.json()["allocated"] is True
        batch = {"allocations": [{"applicationID": "a1", "allocationKey": f"b{i}", "resource": {"vcore": 10}}
                                 for i in range(5)]}
        r = submit.post("/ws/v1/partition/default/allocations/batch", json=batch)
        assert r.status_code == 200 and r.json()["allocated"] == 5
        # reads
        assert anon.get("/ws/v1/partitions").status_code == 401
        parts = read.get("/ws/v1/partitions").json()
        assert parts[0]["capacity"]["usedCapacity"] == {"vcore": 1050}
        assert read.get("/ws/v1/partition/default/queues").json()["queuename"] == "root"
        assert read.get("/ws/v1/partition/default/queue/root.restricted").json()["allocatedResource"] == \
            {"vcore": 1050}
        assert [u["userName"] for u in read.get("/ws/v1/partition/default/usage/users").json()] == ["alice"]
        assert read.get("/ws/v1/partition/default/usage/user/alice").status_code == 200
        assert read.get("/ws/v1/partition/default/usage/groups").json() == []
        assert read.get("/ws/v1/partition/default/usage/group/nobody").status_code == 404
        assert read.get("/ws/v1/partition/default/applications").json()[0]["state"] in ("Starting", "Running")
        assert read.post("/ws/v1/validate-conf", content=CONFIG).json() == {"allowed": True}
        assert read.get("/ws/v1/config").text == CONFIG
        assert read.get("/metrics").status_code == 200
        assert anon.get("/ws/v1/scheduler/healthcheck").json()["Healthy"] is True
        assert anon.get("/openapi.json").status_code == 200
        # admin ACL for a named user
        k1 = "/ws/v1/partition/default/allocation/k1"
        assert submit.delete(k1, params={"user": "mallory"}).status_code == 403
        assert submit.delete(k1, params={"user": "boss"}).status_code == 200
        assert submit.delete("/ws/v1/partition/default/application/a1").status_code == 200
        assert admin.delete("/ws/v1/partition/default/node/n1").status_code == 200
        assert read.get("/ws/v1/partition/default/nodes").json() == []
    assert s.stop() == 0


def test_config_reload_invalid_400_nothing_changed_valid_applied_at_once(
        tmp_path: Path, servers: list[ServerProcess], config_file: Path) -> None:
    s = ServerProcess(config=config_file, store="sqlite:///state.db", cwd=tmp_path)
    servers.append(s.start())
    with s.client() as c:
        c.put("/ws/v1/partition/default/node/n1", json={"capacity": {"vcore": 16000}})
        c.post("/ws/v1/partition/default/applications",
               json={"applicationID": "a1", "user": "sue", "queue": "root.small"})
        assert c.post("/ws/v1/partition/default/allocations",
                      json={"applicationID": "a1", "allocationKey": "k1",
                            "resource": {"vcore": 3000}}).status_code == 201
        before = c.get("/ws/v1/partition/default/queues").json()
        r = c.put("/ws/v1/config", content=CONFIG.replace("vcore: 4", "vcore: -4"))
        assert r.status_code == 400 and r.json()["message"]
        assert c.get("/ws/v1/config").text == CONFIG
        assert c.get("/ws/v1/partition/default/queues").json() == before
        # valid: lowers root.small's max below usage (Q3: accepted, new allocations refused)
        assert c.put("/ws/v1/config", content=CONFIG.replace("vcore: 4", "vcore: 2")).status_code == 200
        assert c.get("/ws/v1/partition/default/queue/root.small").json()["maxResource"] == {"vcore": 2000}
        r = c.post("/ws/v1/partition/default/allocations",
                   json={"applicationID": "a1", "allocationKey": "k2", "resource": {"vcore": 1}})
        assert r.status_code == 409 and r.json()["reasons"][0]["code"] == "queue.max"
        small = c.get("/ws/v1/partition/default/queue/root.small").json()
        assert small["allocatedResource"] == {"vcore": 3000}
    assert s.stop() == 0


def test_restart_restores_the_journalled_state_and_journalled_config(
        tmp_path: Path, servers: list[ServerProcess], config_file: Path) -> None:
    s = ServerProcess(config=config_file, store="sqlite:///state.db", cwd=tmp_path)
    servers.append(s.start())
    new_config = CONFIG.replace("vcore: 4", "vcore: 6")
    with s.client() as c:
        c.put("/ws/v1/partition/default/node/n1", json={"capacity": {"vcore": 16000}})
        c.post("/ws/v1/partition/default/applications",
               json={"applicationID": "a1", "user": "sue", "queue": "root.default"})
        c.post("/ws/v1/partition/default/allocations",
               json={"applicationID": "a1", "allocationKey": "k1", "resource": {"vcore": 1500}})
        assert c.put("/ws/v1/config", content=new_config).status_code == 200
        users_before = c.get("/ws/v1/partition/default/usage/users").json()
    assert s.stop() == 0
    # restart without --config: the journalled (reloaded) config and state come back
    s2 = ServerProcess(config=None, store="sqlite:///state.db", cwd=tmp_path)
    servers.append(s2.start())
    with s2.client() as c:
        assert c.get("/ws/v1/config").text == new_config
        assert c.get("/ws/v1/partition/default/usage/users").json() == users_before
        assert c.get("/ws/v1/partition/default/allocation/k1").json()["resource"] == {"vcore": 1500}
    assert s2.stop() == 0
