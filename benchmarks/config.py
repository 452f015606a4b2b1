"""Configuration loading: ``load_config`` against a bare YAML load of the same text.

The baseline is ``ruamel.yaml``'s safe loader (C parser when installed) in the same process: it parses
the YAML into plain data and does nothing else. ``load_config`` adds line numbers, strict keys and types,
the model, and every validation rule V-1 … V-21; the ratio says what that costs. Sizes grow from 100 to
4,000 queues to show the cost per queue stays flat.

Run: ``.venv/bin/python benchmarks/config.py`` (about a minute).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ruamel.yaml import YAML

from _bench import best_of, write_results
from quotaplane.config import load_config


def config_text(departments: int, teams: int) -> str:
    """A config of ``departments`` x ``teams`` leaf queues, each with resources and a user limit."""
    out = ["partitions:", "  - name: default", "    queues:", "      - name: root", "        queues:"]
    for d in range(departments):
        out += [f"          - name: dept{d}", "            resources:",
                "              max: {vcore: 10000, memory: 100Ti}", "            queues:"]
        for t in range(teams):
            out += [f"              - name: team{t}", "                resources:",
                    "                  max: {vcore: 100, memory: 1Ti}",
                    "                  guaranteed: {vcore: 10, memory: 10Gi}",
                    "                limits:",
                    "                  - {limit: u, users: [alice, '*'], maxresources: {vcore: 10},"
                    " maxapplications: 3}"]
    return "\n".join(out) + "\n"


def main() -> None:
    results: dict[str, object] = {}
    examples = (Path(__file__).resolve().parents[1] / "examples" / "queues.yaml").read_text()
    for label, text, repeat in (("examples_queues_yaml", examples, 20),
                                ("queues_100", config_text(5, 20), 5),
                                ("queues_1000", config_text(20, 50), 3),
                                ("queues_4000", config_text(40, 100), 2)):
        queues = sum(len(list(p.root.walk())) for p in load_config(text).partitions)
        yaml = YAML(typ="safe")
        baseline = best_of(lambda t=text, y=yaml: y.load(t), repeat)
        loaded = best_of(lambda t=text: load_config(t), repeat)
        results[label] = {
            "queues": queues,
            "bytes": len(text),
            "baseline_yaml_load_s": round(baseline, 5),
            "load_config_s": round(loaded, 5),
            "ratio_vs_yaml_load": round(loaded / baseline, 2),
            "load_config_us_per_queue": round(loaded / max(queues, 1) * 1e6, 1),
        }
    write_results("config", results)


if __name__ == "__main__":
    main()
