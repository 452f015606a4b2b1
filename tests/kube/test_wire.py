"""quotaplane.kube.wire: the front's single-object calls on the wire behave as lightkube's client does
— the same request (path, query, body, content type, credentials), the same failures for the retry
policy (a refused answer with its Status and Retry-After, no answer at all), keep-alive reuse only
when safe, TLS with the cluster's CA — and lightkube keeps every call it cannot promise that for."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lightkube import KubeConfig

from quotaplane.kube.api import ApiCallError, KubeApi, RetryPolicy, client_config
from quotaplane.kube.wire import Wire, wire_for

Handler = Callable[[dict[str, Any]], bytes | None]


class Server:
    """A raw HTTP/1.1 server: each request (method, target, headers, body) is recorded and answered
    with the bytes ``handler`` returns (None: the connection is closed without an answer)."""

    def __init__(self, handler: Handler, ssl_context: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.ssl = ssl_context
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl)
        port = self.server.sockets[0].getsockname()[1]
        return f"{'https' if self.ssl else 'http'}://127.0.0.1:{port}"

    async def stop(self) -> None:
        for w in self.writers:
            w.close()
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, target, _ = lines[0].split(" ")
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                request = {"method": method, "target": target, "headers": headers, "body": body}
                self.requests.append(request)
                out = self.handler(request)
                if out is None:
                    writer.close()
                    return
                writer.write(out)
                await writer.drain()
                if b"connection: close" in out.lower():
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()      # the client went away, or the server stops


def answer(status: int, body: Any, *, headers: str = "", chunked: bool = False) -> bytes:
    data = json.dumps(body).encode()
    if chunked:
        mid = len(data) // 2
        payload = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (data[:mid], data[mid:])) + b"0\r\n\r\n"
        return (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                f"{headers}\r\n").encode() + payload
    return (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            f"{headers}\r\n").encode() + data


POD = {"metadata": {"name": "p1", "namespace": "ns1", "uid": "u1"}}


def run(handler: Handler, body: Callable[[KubeApi, Server], Any], *, token: str | None = "t0k",
        retry: RetryPolicy | None = None) -> Any:
    async def main() -> Any:
        server = Server(handler)
        url = await server.start()
        api = KubeApi(client_config(server=url, token=token), retry=retry or RetryPolicy(attempts=1))
        assert api.wire is not None
        try:
            return await body(api, server)
        finally:
            await api.close()
            await server.stop()
    return asyncio.run(main())


def test_the_calls_are_the_requests_lightkube_makes() -> None:
    async def body(api: KubeApi, server: Server) -> list[dict[str, Any]]:
        await api.patch_json("pods", POD, [{"op": "remove", "path": "/spec/schedulingGates/0"}])
        await api.patch_status_condition(POD, {"type": "QuotaAdmitted", "status": "True"})
        await api.patch_merge("leases", {"metadata": {"name": "l", "namespace": "kube-system"}}, {"a": 1})
        made = await api.create("events", {"metadata": {"name": "e1", "namespace": "ns1"}, "reason": "R"})
        got = await api.get("nodes", "n1")
        return [made, got]
    made, got = run(lambda r: answer(200 if r["method"] != "POST" else 201, {"kind": "X", "m": r["method"]}),
                    body)
    assert made == {"kind": "X", "m": "POST"} and got == {"kind": "X", "m": "GET"}


def test_requests_carry_path_query_body_content_type_and_token() -> None:
    seen: list[dict[str, Any]] = []

    async def body(api: KubeApi, server: Server) -> None:
        await api.patch_json("pods", POD, [{"op": "remove", "path": "/spec/schedulingGates/0"}])
        await api.patch_status_condition(POD, {"type": "QuotaAdmitted", "status": "True"})
        await api.create("events", {"metadata": {"name": "e1", "namespace": "ns1"}, "reason": "R"})
        await api.get("leases", "l1", "kube-system")
        seen.extend(server.requests)
        assert server.connections == 1          # one keep-alive connection for all four
    run(lambda r: answer(200, {}), body)
    assert [(r["method"], r["target"]) for r in seen] == [
        ("PATCH", "/api/v1/namespaces/ns1/pods/p1?fieldManager=quotaplane"),
        ("PATCH", "/api/v1/namespaces/ns1/pods/p1/status?fieldManager=quotaplane"),
        ("POST", "/api/v1/namespaces/ns1/events?fieldManager=quotaplane"),
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l1")]
    assert [r["headers"].get("content-type") for r in seen] == [
        "application/json-patch+json", "application/strategic-merge-patch+json", "application/json", None]
    assert all(r["headers"]["authorization"] == "Bearer t0k" for r in seen)
    assert json.loads(seen[0]["body"]) == [{"op": "remove", "path": "/spec/schedulingGates/0"}]
    assert json.loads(seen[1]["body"]) == {"status": {"conditions": [{"type": "QuotaAdmitted",
                                                                      "status": "True"}]}}


def test_a_chunked_answer_and_one_up_to_the_connections_end_are_read_whole() -> None:
    answers = iter([answer(200, {"a": "x" * 5000}, chunked=True),
                    b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + json.dumps({"b": 2}).encode()])

    async def body(api: KubeApi, server: Server) -> list[dict[str, Any]]:
        return [await api.get("nodes", "a"), await api.get("nodes", "b"), await api.get("nodes", "c")]
    first, second, third = run(lambda r: next(answers, answer(200, {"c": 3})), body)
    assert first == {"a": "x" * 5000} and second == {"b": 2} and third == {"c": 3}


def test_a_refused_call_fails_as_through_lightkube_with_its_status_and_retry_after() -> None:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422, "reason": "Invalid",
              "message": "the test failed", "details": {"causes": [{"message": "gate moved"}]}}

    async def body(api: KubeApi, server: Server) -> ApiCallError:
        with pytest.raises(ApiCallError) as info:
            await api.patch_json("pods", POD, [{"op": "test", "path": "/x", "value": 1}])
        return info.value
    exc = run(lambda r: answer(422, status), body)
    assert (exc.code, exc.message, exc.causes) == (422, "the test failed", ["gate moved"])
    assert not exc.transient

    calls: list[float] = []

    def busy(r: dict[str, Any]) -> bytes:
        calls.append(asyncio.get_running_loop().time())
        if len(calls) == 1:
            return answer(429, {"kind": "Status", "code": 429, "message": "slow down"},
                          headers="Retry-After: 1\r\n")
        return answer(200, {})

    async def retried(api: KubeApi, server: Server) -> None:
        await api.patch_status_condition(POD, {"type": "QuotaAdmitted"})
    run(busy, retried, retry=RetryPolicy(attempts=3, base=0.0))
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.9       # the server's Retry-After was kept


def test_no_answer_is_a_transient_failure_and_the_connection_is_not_reused() -> None:
    answers = iter([answer(200, {}), None, answer(200, {"ok": 1})])

    async def body(api: KubeApi, server: Server) -> tuple[ApiCallError, dict[str, Any], int]:
        await api.get("nodes", "a")
        with pytest.raises(ApiCallError) as info:
            await api.get("nodes", "b")
        again = await api.get("nodes", "c")
        return info.value, again, server.connections
    exc, again, connections = run(lambda r: next(answers), body)
    assert exc.code is None and exc.transient
    assert again == {"ok": 1} and connections == 2


def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def body(api: KubeApi, server: Server) -> int:
        await api.get("nodes", "a")
        for w in server.writers:
            w.close()
        await asyncio.sleep(0.05)
        assert await api.get("nodes", "b") == {}
        return server.connections
    assert run(lambda r: answer(200, {}), body) == 2


def test_a_token_file_is_read_again_after_a_401(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old\n")
    config = KubeConfig.from_dict({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"tokenFile": str(token)}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]})

    async def main() -> list[str]:
        server = Server(lambda r: answer(200, {}) if r["headers"]["authorization"] == "Bearer new"
                        else answer(401, {"kind": "Status", "code": 401, "message": "Unauthorized"}))
        url = await server.start()
        config.clusters["c"] = type(config.clusters["c"])(server=url)
        api = KubeApi(config, retry=RetryPolicy(attempts=1))
        try:
            assert api.wire is not None
            with pytest.raises(ApiCallError):       # read again, still the same: not sent again
                await api.get("nodes", "a")
            token.write_text("new\n")          # the kubelet rotated it
            await api.get("nodes", "a")
            return [r["headers"]["authorization"] for r in server.requests]
        finally:
            await api.close()
            await server.stop()
    assert asyncio.run(main()) == ["Bearer old", "Bearer old", "Bearer new"]


def test_tls_with_the_clusters_ca() -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)

    def config(url: str, ca_pem: str) -> KubeConfig:
        import base64
        return KubeConfig.from_dict({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {
                "server": url, "certificate-authority-data": base64.b64encode(ca_pem.encode()).decode()}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]})

    async def main() -> tuple[dict[str, Any], ApiCallError]:
        server = Server(lambda r: answer(200, {"tls": True}), ssl_context=server_ctx)
        url = await server.start()
        good = KubeApi(config(url, ca.cert_pem.bytes().decode()), retry=RetryPolicy(attempts=1))
        bad = KubeApi(config(url, trustme.CA().cert_pem.bytes().decode()), retry=RetryPolicy(attempts=1))
        try:
            assert good.wire is not None and bad.wire is not None
            got = await good.get("nodes", "a")
            with pytest.raises(ApiCallError) as info:
                await bad.get("nodes", "a")
            return got, info.value
        finally:
            await good.close()
            await bad.close()
            await server.stop()
    got, refused = asyncio.run(main())
    assert got == {"tls": True}
    assert refused.code is None and "CERTIFICATE_VERIFY_FAILED" in refused.message


def test_lightkube_keeps_the_calls_it_alone_can_make(monkeypatch: pytest.MonkeyPatch) -> None:
    def with_user(user: dict[str, Any]) -> KubeApi:
        return KubeApi(KubeConfig.from_dict({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    assert with_user({"token": "t"}).wire is not None
    assert with_user({"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                               "command": "true"}}).wire is None
    assert with_user({"username": "a", "password": "b"}).wire is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert with_user({"token": "t"}).wire is None
    assert wire_for(object()) is None


def test_wire_refuses_a_base_url_that_is_not_http() -> None:
    with pytest.raises(ValueError, match="base_url"):
        Wire("ftp://x")
    assert Wire("https://h:6443/prefix/").url("api/v1/pods", {"a": "b c"}) == "/prefix/api/v1/pods?a=b+c"
