"""The small error paths a new user hits (issue 30 #7): one line that names the file, no errno."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).with_name("quotaplane"))


def test_simulate_names_a_missing_trace_or_config(tmp_path: Path) -> None:
    for args, missing in ((["--config", str(ROOT / "examples" / "trace-queues.yaml"), "--trace",
                            str(tmp_path / "nope.jsonl")], tmp_path / "nope.jsonl"),
                          (["--config", str(tmp_path / "nope.yaml"), "--trace",
                            str(ROOT / "examples" / "trace.jsonl")], tmp_path / "nope.yaml")):
        out = subprocess.run([EXE, "simulate", *args], capture_output=True, text=True, timeout=120)
        assert out.returncode == 1
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and str(missing) in lines[0] and "Errno" not in lines[0], out.stderr


def test_validate_names_a_missing_file_without_a_line(tmp_path: Path) -> None:
    out = subprocess.run([EXE, "validate", str(tmp_path / "nope.yaml")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip() == f"{tmp_path / 'nope.yaml'}: cannot read file: No such file or directory"
