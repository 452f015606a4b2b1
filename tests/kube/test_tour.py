"""docs/kubernetes.md's emulator tour runs as written: a real ``quotaplane kube`` process against the
emulator, pods gated and admitted, the waiting reason, completion, a bound pod listed on its node."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_emulator_tour_runs_and_says_what_the_docs_say() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "kube_tour.py")], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "train-0: ungated (admitted)" in text and "train-2: gated" in text
    assert "train-2 says why it waits: queue.max at root.team-a" in text
    assert "train-2 is ungated" in text
    assert "the node lists ['uid-train-1']" in text
    docs = (ROOT / "docs" / "kubernetes.md").read_text()
    assert "examples/kube_tour.py" in docs
