"""schemathesis (its CLI, with the repository's schemathesis.toml) against the real ``quotaplane
serve`` (issue 32 item 11): every phase — examples, coverage, fuzzing, stateful — and every check,
clean. Short here (a few examples per operation); by hand, more:
``st run http://127.0.0.1:9080/openapi.json -n 200``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import ROOT, ServerProcess


def test_schemathesis_against_serve_is_clean(tmp_path: Path) -> None:
    server = ServerProcess(config=ROOT / "examples" / "queues.yaml", store=f"sqlite:///{tmp_path}/s.db",
                           cwd=tmp_path).start(timeout=120)
    try:
        st = str(Path(sys.executable).with_name("st"))
        r = subprocess.run([st, "--config-file", str(ROOT / "schemathesis.toml"), "run",
                            f"{server.url}/openapi.json", "-n", "8", "-w", "1", "--generation-deterministic",
                            "--request-timeout", "60",
                            # a stream stays open until the client hangs up: not a request/response operation
                            "--exclude-path-regex", "/events/stream$"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    finally:
        server.stop()
