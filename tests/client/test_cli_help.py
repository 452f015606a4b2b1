"""``quotaplane --help`` as a new user reads it: each command's summary flows as one paragraph (found
trying it: rich's markup mode kept the docstrings' own line breaks, so "Every option can also be" ended a
line in the middle of the list) and nothing of the text is lost to the markup."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXE = str(Path(sys.executable).with_name("quotaplane"))


def _help(*args: str) -> str:
    out = subprocess.run([EXE, *args, "--help"], env={**os.environ, "COLUMNS": "300"}, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_command_summaries_are_not_broken_mid_sentence() -> None:
    text = _help()
    assert "Every option can also be given by its environment variable" in text
    assert "what happened, and what would have happened under a proposed configuration" in text


def test_no_text_is_lost_to_the_markup() -> None:
    assert "QUOTAPLANE_MAX_BODY_BYTES" in _help("serve")
    assert "cpu=2 memory=4Gi" in _help("whatif") and "nvidia.com/gpu=1" in _help("whatif")
