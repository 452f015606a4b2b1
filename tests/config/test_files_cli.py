"""``quotaplane validate FILE...`` and the ``validate_files`` helper behind it."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from quotaplane.cli import app
from quotaplane.config.files import validate_file, validate_files

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GOOD = "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
BAD = ("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: 'a b c'\n"
       "        queues:\n          - name: 'x.y'\n")


def test_validate_files_ok_and_problem_lines(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    ok, lines = validate_files([good, bad])
    assert ok is False
    assert lines[0] == f"{good}: ok"
    assert lines[1] == f"{bad}:5: multiple spaces found in ACL: 'a b c'"
    assert lines[2].startswith(f"{bad}:7: invalid queue name")
    assert len(lines) == 3


def test_validate_files_all_good(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    assert validate_files([str(good)]) == (True, [f"{good}: ok"])


def test_unreadable_and_non_utf8_files_are_problem_lines_without_a_line(tmp_path: Path) -> None:
    """Issue 30 #7: a missing file said "line 0"; a problem of the whole file names no line."""
    missing = tmp_path / "missing.yaml"
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    ok, lines = validate_files([missing, binary, tmp_path])
    assert ok is False
    assert lines[0] == f"{missing}: cannot read file: No such file or directory"
    assert lines[1].startswith(f"{binary}: file is not UTF-8")
    assert lines[2].startswith(f"{tmp_path}: cannot read file")


def test_problem_without_line_prints_zero(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert validate_file(empty) == [(0, "configuration is empty: a 'partitions' list is required")]


def test_cli_validate_exit_codes_and_output(tmp_path: Path) -> None:
    runner = CliRunner()
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    result = runner.invoke(app, ["validate", str(good)])
    assert result.exit_code == 0, result.output
    assert f"{good}: ok" in result.output
    result = runner.invoke(app, ["validate", str(good), str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:5: multiple spaces found in ACL: 'a b c'" in result.output
    assert f"{bad}:7: invalid queue name" in result.output


def test_cli_validate_examples() -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["validate", str(EXAMPLES / "queues.yaml")]).exit_code == 0
    result = runner.invoke(app, ["validate", str(EXAMPLES / "invalid-limits.yaml")])
    assert result.exit_code == 1
    assert "invalid-limits.yaml:17: should not specify only one group limit" in result.output
    assert result.output.count("invalid-limits.yaml:") >= 9
