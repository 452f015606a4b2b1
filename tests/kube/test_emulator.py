"""The emulator answers as kube-apiserver does where the front depends on it (the rules and their
upstream sources: tests/kube/emulator.py's docstring)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.kube.emulator import Emulator
from tests.kube.harness import node, pod

PODS = "/api/v1/namespaces/team-a/pods"
JSON_PATCH = {"Content-Type": "application/json-patch+json"}
MERGE = {"Content-Type": "application/merge-patch+json"}
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}


@pytest.fixture
def api() -> Iterator[tuple[Emulator, httpx.Client]]:
    e = Emulator(graceful=True).start()
    with httpx.Client(base_url=e.url, timeout=10) as c:
        yield e, c
    e.stop()


def _lines(c: httpx.Client, path: str, **params: Any) -> list[dict[str, Any]]:
    with c.stream("GET", path, params={"watch": "true", **params}) as r:
        return [json.loads(line) for line in r.iter_lines() if line]


Api = tuple[Emulator, httpx.Client]


def test_a_watch_resumes_after_a_version_and_an_expired_one_is_410(api: Api) -> None:
    e, c = api
    c.post(PODS, json=pod("a"))
    version = c.get(PODS).json()["metadata"]["resourceVersion"]
    c.post(PODS, json=pod("b"))
    events = _lines(c, PODS, resourceVersion=version, timeoutSeconds="1")
    assert [(ev["type"], ev["object"]["metadata"]["name"]) for ev in events] == [("ADDED", "b")]
    e.compact()
    events = _lines(c, PODS, resourceVersion=version, timeoutSeconds="1")
    assert [ev["type"] for ev in events] == ["ERROR"]
    status = events[0]["object"]
    assert status["code"] == 410 and status["reason"] == "Expired"
    assert status["message"].startswith(f"too old resource version: {version} (")
    marks = _lines(c, PODS, resourceVersion=c.get(PODS).json()["metadata"]["resourceVersion"],
                   allowWatchBookmarks="true", timeoutSeconds="1")
    assert marks and all(ev["type"] == "BOOKMARK" for ev in marks)


def test_a_field_selector_narrows_lists_and_watches(api: tuple[Emulator, httpx.Client]) -> None:
    _, c = api
    for name in ("a", "b"):
        c.post(PODS, json=pod(name))
    listed = c.get(PODS, params={"fieldSelector": "metadata.name=b"}).json()["items"]
    assert [p["metadata"]["name"] for p in listed] == ["b"]
    assert "kind" not in listed[0]                      # list items of built-in kinds carry no kind
    events = _lines(c, PODS, fieldSelector="metadata.name=a", timeoutSeconds="1")
    assert [ev["object"]["metadata"]["name"] for ev in events] == ["a"]


def test_a_kind_initialising_answers_429_with_retry_after(api: tuple[Emulator, httpx.Client]) -> None:
    e, c = api
    e.initializing("elasticquotas", 1)
    r = c.get("/apis/scheduling.sigs.k8s.io/v1alpha1/elasticquotas")
    assert r.status_code == 429 and r.headers["Retry-After"] == "1"
    assert r.json()["message"] == "storage is (re)initializing"
    assert r.json()["details"]["retryAfterSeconds"] == 1
    assert c.get("/apis/scheduling.sigs.k8s.io/v1alpha1/elasticquotas").status_code == 200


def test_gates_may_only_be_removed_and_the_spec_is_immutable(api: tuple[Emulator, httpx.Client]) -> None:
    _, c = api
    p = pod("a")
    p["spec"]["schedulingGates"] = [{"name": "quotaplane.io/admission"}]
    c.post(PODS, json=p)
    r = c.patch(f"{PODS}/a", json=[{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "x"}}],
                headers=JSON_PATCH)
    assert r.status_code == 422
    assert "only deletion is allowed, but found new scheduling gate 'x'" in r.json()["message"]
    r = c.patch(f"{PODS}/a", json={"spec": {"nodeName": "n1"}}, headers=MERGE)
    assert r.status_code == 422 and "pod updates may not change fields" in r.json()["message"]
    r = c.patch(f"{PODS}/a", json=[{"op": "test", "path": "/spec/schedulingGates/0/name", "value": "other"},
                                   {"op": "remove", "path": "/spec/schedulingGates/0"}], headers=JSON_PATCH)
    assert r.status_code == 422                          # a failed JSON-patch test
    r = c.patch(f"{PODS}/a", json=[{"op": "remove", "path": "/spec/schedulingGates/0"}], headers=JSON_PATCH)
    assert r.status_code == 200 and r.json()["spec"]["schedulingGates"] == []


def test_status_patches_merge_conditions_by_type(api: tuple[Emulator, httpx.Client]) -> None:
    _, c = api
    c.post(PODS, json=pod("a"))
    for cond in ({"type": "A", "status": "True"}, {"type": "B", "status": "False"},
                 {"type": "A", "status": "False"}):
        r = c.patch(f"{PODS}/a/status", json={"status": {"conditions": [cond]}, "spec": {"x": 1}},
                    headers=STRATEGIC)
        assert r.status_code == 200
    got = c.get(f"{PODS}/a").json()
    assert [(x["type"], x["status"]) for x in got["status"]["conditions"]] == [("A", "False"), ("B", "False")]
    assert "x" not in got["spec"]                      # the status subresource changes only the status
    r = c.patch("/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/team-a/elasticquotas/q", json={},
                headers=STRATEGIC)
    assert r.status_code in (404, 415)


def test_an_eviction_honours_the_budget_and_rewrites_disruption_target(api: tuple[Emulator, httpx.Client]
                                                                     ) -> None:
    e, c = api
    c.post("/api/v1/nodes", json=node("n1"))
    for name in ("a", "b"):
        c.post(PODS, json=pod(name, labels={"app": "web"}))
        c.post(f"{PODS}/{name}/binding", json={"target": {"kind": "Node", "name": "n1"}})
        c.patch(f"{PODS}/{name}/status", json={"status": {"phase": "Running"}}, headers=MERGE)
    c.post("/apis/policy/v1/namespaces/team-a/poddisruptionbudgets", json={
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
    c.patch(f"{PODS}/a/status", json={"status": {"conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByQuotaplane"}]}},
        headers=STRATEGIC)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "a", "namespace": "team-a"}}
    r = c.post(f"{PODS}/a/eviction", json=eviction)
    assert r.status_code == 429
    assert r.json()["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert r.json()["details"]["causes"][0]["reason"] == "DisruptionBudget"
    c.patch("/apis/policy/v1/namespaces/team-a/poddisruptionbudgets/web", json={"spec": {"minAvailable": 1}},
            headers=MERGE)
    assert c.post(f"{PODS}/a/eviction", json=eviction).status_code == 201
    a = c.get(f"{PODS}/a").json()                       # bound: terminating until the kubelet is done
    assert a["metadata"]["deletionTimestamp"]
    target = [x for x in a["status"]["conditions"] if x["type"] == "DisruptionTarget"]
    assert [(x["reason"], x["message"]) for x in target] == [
        ("EvictionByEvictionAPI", "Eviction API: evicting")]
    e.finish("team-a", "a")
    assert c.get(f"{PODS}/a").status_code == 404
    uid = c.get(f"{PODS}/b").json()["metadata"]["uid"]
    r = c.post(f"{PODS}/b/eviction", json={**eviction, "metadata": {"name": "b"},
                                           "deleteOptions": {"preconditions": {"uid": uid + "x"}}})
    assert r.status_code == 409


def test_a_list_in_pages_is_one_consistent_list_and_an_expired_token_is_410(api: Api) -> None:
    e, c = api
    for name in "abcde":
        c.post(PODS, json=pod(name))
    c.post("/api/v1/namespaces/team-b/pods", json=pod("z", namespace="team-b"))
    first = c.get("/api/v1/pods", params={"limit": "2"}).json()
    assert [p["metadata"]["name"] for p in first["items"]] == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 4
    version = first["metadata"]["resourceVersion"]
    c.post(PODS, json=pod("bb"))                        # written between pages: not in this list
    c.delete(f"{PODS}/d")
    names, token = ["a", "b"], first["metadata"]["continue"]
    while token:
        page = c.get("/api/v1/pods", params={"limit": "2", "continue": token}).json()
        assert page["metadata"]["resourceVersion"] == version
        names += [p["metadata"]["name"] for p in page["items"]]
        token = page["metadata"].get("continue")
    assert names == ["a", "b", "c", "d", "e", "z"]
    in_ns = c.get(PODS, params={"limit": "3"}).json()   # a namespace's own range, at the current version
    assert [p["metadata"]["name"] for p in in_ns["items"]] == ["a", "b", "bb"]
    assert in_ns["metadata"]["remainingItemCount"] == 2
    selected = c.get(PODS, params={"limit": "10", "fieldSelector": "metadata.name=c"}).json()
    assert [p["metadata"]["name"] for p in selected["items"]] == ["c"]
    assert "continue" not in selected["metadata"]
    c.post(PODS, json=pod("f"))
    e.compact()
    expired = c.get(PODS, params={"limit": "2", "continue": in_ns["metadata"]["continue"]})
    assert expired.status_code == 410 and expired.json()["reason"] == "Expired"
    assert expired.json()["message"].startswith("The provided continue parameter is too old")
    bad = c.get(PODS, params={"limit": "2", "continue": "not-a-token"})
    assert bad.status_code == 400 and bad.json()["message"].startswith("continue key is not valid")
