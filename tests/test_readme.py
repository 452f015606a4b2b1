"""The README's tour stays true: its Python example runs and prints what the comments say."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_python_tour_runs_and_matches_its_comments() -> None:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    code = blocks[0]
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    printed = out.getvalue().splitlines()
    assert printed[0] == "True []"
    assert printed[1] == "user.maxresources root.engineering.sandbox map[vcore:5000]"
    assert printed[2] == "['user.maxresources']"
    assert printed[3] == "True"


def test_readme_shows_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert "make run" in text and "make test" in text
