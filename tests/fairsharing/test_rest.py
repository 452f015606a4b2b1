"""The weighted share over REST: the queue's ``standing`` and the ``quotaplane_queue_weighted_share``
metric (docs/fair-sharing.md, docs/metrics.md)."""

from __future__ import annotations

from fastapi.testclient import TestClient

import quotaplane as qp
from quotaplane.server.app import create_app

BASE = "/ws/v1/partition/default"
GPU = "nvidia.com/gpu"
CONFIG = f"""
partitions:
  - name: default
    fairsharing: {{enabled: true}}
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: cq
            resources: {{guaranteed: {{{GPU}: 2}}}}
          - name: other
"""


def test_weighted_share_metric_and_standing() -> None:
    s = qp.Scheduler.from_yaml(CONFIG)
    try:
        with TestClient(create_app(s), raise_server_exceptions=False) as c:
            assert c.put(f"{BASE}/node/n", json={"capacity": {GPU: 10}}).status_code == 201
            r = c.post(f"{BASE}/applications", json={"applicationID": "a", "user": "u", "queue": "root.cq"})
            assert r.status_code == 201, r.text
            r = c.post(f"{BASE}/allocations", json={"applicationID": "a", "allocationKey": "k",
                                                     "resource": {GPU: 5}})
            assert r.status_code == 201, r.text
            text = c.get("/metrics").text
            assert 'quotaplane_queue_weighted_share{partition="default",queue="root.cq"} 300.0' in text
            assert 'quotaplane_queue_weighted_share{partition="default",queue="root.other"} 0.0' in text
            r = c.get(f"{BASE}/standing", params={"kind": "queue", "name": "root.cq"})
            assert r.status_code == 200, r.text
            assert r.json()["fairSharing"]["weightedShare"] == 300
    finally:
        s.close()
