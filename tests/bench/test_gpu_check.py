"""bench/gpu_check.sh keeps working where the suite runs: on the CPU it builds the real shapes
(2 layers), times every pass, simulates a keystroke and runs the width probe."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_check_runs_on_the_cpu(tmp_path):
    out = tmp_path / "check.json"
    done = subprocess.run([str(ROOT / "bench" / "gpu_check.sh"), "--device", "cpu", "--models", "1.5B",
                           "--repeats", "1", "--no-tests", "--json", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    figures = json.loads(out.read_text())
    what = [(r["model"], r["what"].split(" (")[0].split(":")[0]) for r in figures["rows"]]
    assert what == [("0.5B", "draft step, 1 row"), ("1.5B", "1-row target pass"), ("1.5B", "8-row target pass"),
                    ("1.5B", "16-row target pass"), ("1.5B", "prefill chunk of 128"),
                    ("1.5B", "keystroke, lookup"), ("1.5B", "keystroke, 0.5B draft")]
    assert all(r["eager_ms"] > 0 and r["captured_ms"] is None for r in figures["rows"]), "no graphs on a CPU"
    probes = {p["model"]: p for p in figures["probes"]}
    assert set(probes) == {"1.5B", "0.5B"}
    assert all(1 <= p["low"] <= p["largest"] == 8 for p in probes.values()), probes
    assert "| 1.5B  | 8-row target pass (384 cached)" in done.stdout
    assert "width probe (each used width run twice):" in done.stdout
