"""Issue 14 #8: names are printable — control and bidi characters (NUL, newline, U+202E) are refused in
application ids, allocation keys, node ids, users and groups, through the library and REST (400)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from quotaplane import Resource
from quotaplane.config.identity import UserGroup
from tests.partition.helpers import scheduler
from tests.server.conftest import SUBMIT

BAD = ["a\x00b", "a\nb", "evil\u202etxt", "zero\u200bwidth", "tab\tname", "bom\ufeff"]


@pytest.mark.parametrize("bad", BAD)
def test_the_library_refuses_non_printable_names(bad: str) -> None:
    s = scheduler()
    p = s.partition("default")
    before = s.dump_state()
    with pytest.raises(ValueError, match="control or invisible"):
        p.add_application(bad, UserGroup("alice", ["dev"]), queue="root.default")
    with pytest.raises(ValueError, match="control or invisible"):
        UserGroup(bad, ["dev"])
    with pytest.raises(ValueError, match="control or invisible"):
        UserGroup("alice", [bad])
    with pytest.raises(ValueError, match="control or invisible"):
        p.add_node(bad, Resource({"vcore": 1}))
    p.add_application("ok", UserGroup("alice", ["dev"]), queue="root.default")
    before = s.dump_state()
    with pytest.raises(ValueError, match="control or invisible"):
        p.allocate("ok", bad, Resource({"vcore": 1}))
    with pytest.raises(ValueError, match="control or invisible"):
        p.add_ask("ok", bad, Resource({"vcore": 1}))
    assert s.dump_state() == before


def test_printable_unicode_names_are_fine() -> None:
    s = scheduler()
    p = s.partition("default")
    p.add_application("équipe-données", UserGroup("zoë", ["équipe"]), queue="root.default")
    assert p.application("équipe-données") is not None


@pytest.mark.parametrize("bad", BAD)
def test_rest_answers_400_for_non_printable_names(client: TestClient, bad: str) -> None:
    r = client.post("/ws/v1/partition/default/applications",
                    json={"applicationID": bad, "user": "sue", "queue": "root.default"}, headers=SUBMIT)
    assert r.status_code == 400, r.text
    r = client.post("/ws/v1/partition/default/applications",
                    json={"applicationID": "fine", "user": "sue", "groups": [bad], "queue": "root.default"},
                    headers=SUBMIT)
    assert r.status_code == 400, r.text


def test_rest_refuses_a_node_id_with_control_characters(client: TestClient) -> None:
    from tests.server.conftest import ADMIN

    r = client.put("/ws/v1/partition/default/node/a%00b", json={"capacity": {"vcore": 1000}}, headers=ADMIN)
    assert r.status_code == 400, r.text
    assert client.get("/ws/v1/partition/default/nodes", headers=ADMIN).json() == []
