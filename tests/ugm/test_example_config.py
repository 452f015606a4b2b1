"""The shipped example configuration (examples/queues.yaml) through the user group manager."""

from __future__ import annotations

from pathlib import Path

import pytest

from quotaplane.ugm import Manager

from .helpers import R, from_yaml, ug

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "queues.yaml"
G = 10**9
GI = 2**30


@pytest.fixture(scope="module")
def text() -> str:
    return EXAMPLE.read_text()


@pytest.fixture
def m(text: str) -> Manager:
    return from_yaml(text)


def test_sandbox_applies_the_seed_example_under_the_cluster_cap(m: Manager) -> None:
    sandbox = "root.engineering.sandbox"
    # sue: her own sandbox limit, plus the root's per-user cap (named at sandbox only: W-2 per queue)
    assert m.headroom(sandbox, "a1", ug("sue")) == {"memory": 25 * G, "vcore": 5000}
    assert m.headroom("root.default", "a2", ug("sue")) == {"memory": 2**40, "vcore": 200_000}
    # a development member: user catch-all and the development budget
    assert m.headroom(sandbox, "a3", ug("bob", "development")) == {"memory": 10 * G, "vcore": 1000}
    assert m.increase_tracked_resource(sandbox, "a3", R(vcore=1000), ug("bob", "development"))
    assert m.app_group("a3", ug("bob", "development")) == "development"
    # anyone else counts against the shared * group of the sandbox
    assert m.increase_tracked_resource(sandbox, "a4", R(vcore=1000), ug("eve", "sales"))
    assert m.app_group("a4", ug("eve", "sales")) == "*"


def test_ml_gpu_budgets_by_group(m: Manager) -> None:
    ml = "root.engineering.ml"
    researcher = ug("rita", "ml-research")
    assert m.increase_tracked_resource(ml, "r1", R(**{"nvidia.com/gpu": 12}), researcher)
    assert not m.increase_tracked_resource(ml, "r2", R(**{"nvidia.com/gpu": 1}), ug("rob", "ml-research"))
    engineer = ug("ed", "engineering")
    assert m.app_group("e1", engineer) is None
    assert m.headroom(ml, "e1", engineer) == {"nvidia.com/gpu": 4, "memory": 2**40, "vcore": 200_000}


def test_research_interactive_notebooks_per_user(m: Manager) -> None:
    path = "root.research.interactive"
    carol = ug("carol", "researchers")
    assert m.increase_tracked_resource(path, "n1", R(vcore=1000), carol)
    assert m.increase_tracked_resource(path, "n2", R(vcore=1000), carol)
    assert not m.can_run_app(path, "n3", carol)
    assert m.headroom(path, "n1", carol) == {"vcore": 2000, "memory": 16 * GI}
    # the research group budget (80 vcore at root.research) also counts the batch queue
    assert m.increase_tracked_resource("root.research.batch", "b1", R(vcore=77_000), ug("dan", "researchers"))
    assert m.headroom(path, "n1", carol) == {"vcore": 1000, "memory": 16 * GI}
    assert m.get_group_resources("researchers") == {"vcore": 79_000}
