"""Every YAML block of docs/ is a configuration a user can load, through the real loader, or says on
its first line which larger file it is a fragment of (``# fragment of examples/….yaml``): that file
loads, and the fragment is part of it (its data found in the file's, ``[...]``, ``{...}`` and ``...``
standing for anything). Found trying the product as a new user: the first blocks of docs/budgets.md
and docs/history.md, copied into a file, did not load (no queues)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from quotaplane.config import load_config
from quotaplane.config.windows import parse_windows
from quotaplane.policies.registry import check_extensions
from quotaplane.scheduler import Scheduler
from quotaplane.windows.driver import edges

ROOT = Path(__file__).resolve().parents[1]
FRAGMENT = re.compile(r"# fragment of (\S+\.ya?ml)\b")
ELIDED = ("...", ["..."], {"...": None})


def _blocks() -> list[tuple[str, str]]:
    out = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        text = doc.read_text()
        for m in re.finditer(r"^```ya?ml\n(.*?)^```", text, flags=re.S | re.M):
            out.append((f"{doc.name}:{text[:m.start()].count(chr(10)) + 1}", m.group(1)))
    return out


BLOCKS = _blocks()


def _loads(text: str, where: str, *, windows: bool = True) -> None:
    """Through the loader the service uses (every plug-in's policy built), nothing refused — also with
    each of its time windows open (the configuration the window's edge writes)."""
    s = Scheduler.from_yaml(text)
    s.close()
    assert check_extensions(load_config(text)) == [], where
    if not windows:
        return
    for part in (yaml.safe_load(text) or {}).get("partitions") or ():
        for w in parse_windows(part.get("windows") or []):
            lo = datetime(2026, 12, 1, tzinfo=UTC)
            start, _ = next(w.spans(lo, lo + timedelta(days=400)))
            opened = edges(text, start / 1000 + 1)
            assert opened is not None, f"{where}: window {w.name} does not open"
            _loads(opened[0], f"{where} with window {w.name} open", windows=False)


def _within(part: Any, whole: Any) -> bool:
    """``part`` is ``whole``, or a part of it: a mapping's keys with their values within, a list's
    items within its items in order; an elision stands for anything."""
    if part in ELIDED:
        return True
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(k in whole and _within(v, whole[k]) for k, v in part.items())
    if isinstance(part, list):
        if not isinstance(whole, list):
            return False
        items = iter(whole)
        return all(any(_within(p, w) for w in items) for p in part)
    return bool(part == whole)


def _anywhere(part: Any, whole: Any) -> bool:
    if _within(part, whole):
        return True
    children = whole.values() if isinstance(whole, dict) else whole if isinstance(whole, list) else ()
    return any(_anywhere(part, c) for c in children)


def test_docs_have_yaml_blocks() -> None:
    assert len(BLOCKS) >= 15


@pytest.mark.parametrize(("where", "block"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_every_yaml_block_of_the_docs_loads_or_names_the_file_it_is_part_of(where: str, block: str) -> None:
    first = block.splitlines()[0]
    m = FRAGMENT.match(first)
    if m is None:
        assert not first.lstrip().startswith("- ") and block.startswith("partitions:"), (
            f"{where}: a YAML block is a whole configuration (partitions: …) or starts with "
            f"'# fragment of <file>'")
        _loads(block, where)
        return
    path = ROOT / m.group(1)
    assert path.is_file(), f"{where}: names {m.group(1)}, which does not exist"
    text = path.read_text()
    _loads(text, str(path))
    part = yaml.safe_load(block)
    assert part is not None and _anywhere(part, yaml.safe_load(text)), (
        f"{where}: the fragment is not part of {m.group(1)}")


def test_a_fragment_that_is_not_part_of_its_file_is_found() -> None:
    whole = yaml.safe_load((ROOT / "examples" / "queues.yaml").read_text())
    assert _anywhere(yaml.safe_load("limits:\n  - limit: \"specific user\"\n    users: [sue]\n"), whole)
    assert not _anywhere(yaml.safe_load("limits:\n  - limit: \"specific user\"\n    users: [bob]\n"), whole)
    assert _anywhere(yaml.safe_load("queues: [...]\nname: root\n"), whole)
