"""Issue 14 #5: after the first start the store, not ``--config``, is the source of truth.

``make run`` always passes ``--config``; elastic quotas and quota trees created over REST were gone
after a restart, with no log line. The rule now: a configuration file that is unchanged since it was
last given at a start leaves the journalled configuration (with every change made over the API) in
force; a file that changed replaces it, and the log says what that discards.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.server.app import create_app
from quotaplane.server.main import build_scheduler

FILE = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: team
"""
QUOTA = """\
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {name: team-x, namespace: team-x}
spec: {max: {cpu: 10}, min: {cpu: 2}}
"""


def _store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


def _configure_over_rest(store: str) -> str:
    s = build_scheduler(FILE, store)
    with TestClient(create_app(s), raise_server_exceptions=False) as c:
        r = c.put("/ws/v1/partition/default/elasticquotas", content=QUOTA)
        assert r.status_code == 200, r.text
    text: str = s.config_text
    s.close()
    assert "team-x" in text
    return text


def test_an_unchanged_config_file_keeps_what_was_configured_over_rest(tmp_path: Path) -> None:
    store = _store(tmp_path)
    edited = _configure_over_rest(store)
    again = build_scheduler(FILE, store)               # `make run` again, same --config
    try:
        assert again.config_text == edited
        with TestClient(create_app(again), raise_server_exceptions=False) as c:
            names = [q["name"] for q in c.get("/ws/v1/partition/default/elasticquotas").json()]
        assert "team-x" in names
    finally:
        again.close()
    # and it stays so over any number of restarts
    third = build_scheduler(FILE, store)
    assert third.config_text == edited
    third.close()


def test_a_changed_config_file_replaces_the_journalled_config_and_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = _store(tmp_path)
    _configure_over_rest(store)
    changed = FILE + "          - name: other\n"
    with caplog.at_level(logging.WARNING, logger="quotaplane"):
        again = build_scheduler(changed, store)
    try:
        assert again.config_text == changed
        warned = " ".join(r.getMessage() for r in caplog.records)
        assert "changed since" in warned and "over the API" in warned
    finally:
        again.close()
    # the changed file is now the one given at start: a restart with it keeps what is journalled
    s = build_scheduler(changed, store)
    assert s.config_text == changed
    s.close()


def test_without_a_config_file_the_journalled_config_is_kept(tmp_path: Path) -> None:
    store = _store(tmp_path)
    edited = _configure_over_rest(store)
    s = build_scheduler(None, store)
    assert s.config_text == edited
    s.close()


def test_the_library_follows_the_same_rule(tmp_path: Path) -> None:
    store = _store(tmp_path)
    s = qp.Scheduler.from_yaml(FILE, store=store)
    s.update_config(FILE.replace("- name: team", "- name: team2"))
    edited = s.config_text
    s.close()
    s = qp.Scheduler.from_yaml(FILE, store=store)
    assert s.config_text == edited
    s.close()
