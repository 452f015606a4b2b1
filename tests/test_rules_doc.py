"""Every rule id cited in the repository resolves in docs/rules.md (the docs speak to users: a reader can
look up what ``V-12`` or ``decision S1`` means without the project's private notes)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ID = re.compile(r"\b((?:R|Q|K8|V|G|W|H|M|P|N|C|A)-\d+|PR-[A-Z]\d+|(?:U|Q|S|E|F|P|A|B|C)\d{1,2})\b")
#: names in the code that look like rule ids but are not (test fixtures, lint codes)
NOT_RULES = {"L1", "V1"}


def _cited() -> dict[str, str]:
    found: dict[str, str] = {}
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "src").rglob("*.py")),
             *sorted((ROOT / "tests").rglob("*.py"))]
    for path in paths:
        if path.name == "rules.md" or path == Path(__file__):
            continue
        for m in ID.finditer(path.read_text()):
            found.setdefault(m.group(1), str(path.relative_to(ROOT)))
    return found


def _listed() -> set[str]:
    text = (ROOT / "docs" / "rules.md").read_text()
    return {m.group(1) for m in re.finditer(r"^\| ([A-Z][A-Z0-9-]*) \|", text, re.MULTILINE)}


def test_every_cited_rule_id_is_listed_in_docs_rules() -> None:
    listed = _listed()
    missing = {k: where for k, where in _cited().items() if k not in listed and k not in NOT_RULES}
    assert not missing, f"rule ids cited but not in docs/rules.md: {missing}"


def test_the_rules_page_lists_ids_with_a_meaning_and_a_source() -> None:
    text = (ROOT / "docs" / "rules.md").read_text()
    rows = [line for line in text.splitlines() if re.match(r"^\| [A-Z][A-Z0-9-]* \|", line)]
    assert len(rows) > 150
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) >= 3 and cells[1] and cells[2], row


def test_every_cited_seed_and_reference_section_is_described() -> None:
    """Docs cite "seed 002" and "reference §2.9": the rules page says what each one is."""
    text = (ROOT / "docs" / "rules.md").read_text()
    sections = set(re.findall(r"^\| §([0-9.]+) \|", text, re.MULTILINE))
    seeds = set(re.findall(r"^\| (seed 00[0-4]) \|", text, re.MULTILINE))
    missing: list[str] = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        body = path.read_text()
        missing += [f"{path.name}: {m}" for m in re.findall(r"seed 00\d", body) if m not in seeds]
        missing += [f"{path.name}: §{m}" for m in re.findall(r"reference §([0-9]+(?:\.[0-9]+)?)", body)
                    if m not in sections]
    assert not missing, missing
