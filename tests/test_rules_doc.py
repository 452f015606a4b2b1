"""Every rule id cited in the repository resolves in docs/rules.md (the docs speak to users: a reader can
look up what ``V-12`` or ``decision S1`` means without the project's private notes)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: every hyphenated word that looks like an id (``V-12``, ``PR-Y1``, ``T-6``, ``K8-3``), whatever its
#: prefix — so an id of a prefix this test has never heard of is caught too — and the decisions
#: (``U1``, ``S2``, ``E5`` …)
ID = re.compile(r"(?<![\w.-])([A-Z][A-Z0-9]{0,2}-[A-Z]?\d+|(?:U|Q|S|E|F|P|A|B|C)\d{1,2})(?![\w-])")
#: words that look like rule ids but are not (test fixtures, lint codes, standards, a regex range)
NOT_RULES = {"L1", "V1", "E-2", "A-Z0", "E1-E4"}
NOT_RULE_PREFIXES = ("UTF-", "SHA-", "KEP-")


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
    missing = {k: where for k, where in _cited().items() if k not in listed and k not in NOT_RULES
               and not k.startswith(NOT_RULE_PREFIXES)}
    assert not missing, f"rule ids cited but not in docs/rules.md: {missing}"


def test_the_id_pattern_catches_every_prefix() -> None:
    """Issue 30 #6: T-6 and K-2 were cited but not listed, and the check did not know their prefixes."""
    text = "as in YuniKorn, T-6/T-7; K-2 as adapted; V-12, PR-Y1, K8-3 and U9; not UTF-8 or sha-256"
    assert [m.group(1) for m in ID.finditer(text)] == ["T-6", "T-7", "K-2", "V-12", "PR-Y1", "K8-3", "U9",
                                                       "UTF-8"]


#: project documents that are not shipped: user docs must not send a reader to them
UNSHIPPED = re.compile(r"\b(quality\.md|contract\.md|product\.md|decisions\.md|core-design\.md|seeds/|"
                       r"shared/(?:spec|reference)|issue \d+)")


def test_user_docs_cite_no_unshipped_document() -> None:
    """Issue 30 #6: README and docs/ speak to users; the project's notes are not there to read."""
    found = [f"{p.relative_to(ROOT)}:{n}: {m.group(1)}"
             for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
             for n, line in enumerate(p.read_text().splitlines(), 1) for m in UNSHIPPED.finditer(line)]
    assert not found, found


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
