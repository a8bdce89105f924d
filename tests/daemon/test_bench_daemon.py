"""`specd bench-daemon` against a real daemon: it measures each figure and writes them as JSON."""

from __future__ import annotations

import json
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "daemon" / "scheduler.py"


def test_bench_daemon_reports_edit_cancel_and_burst(daemon, tmp_path):
    out = tmp_path / "bench.json"
    result = daemon.specd("bench-daemon", "--file", str(EXAMPLE), "--burst", "6", "--interval-ms", "0",
                          "--cancels", "2", "--max-tokens", "8", "--json", str(out))
    assert result.returncode == 0, result.stderr
    r = json.loads(out.read_text())
    assert r["edit"]["edit_reused_tokens"] > 0 and r["edit"]["cold_prefilled_tokens"] > 0
    assert r["edit"]["deleted_back_from_cache"] and r["edit"]["deleted_back_same"]
    a = r["accept"]
    assert not a["no_prefetch_from_cache"] and a["prefetched_from_cache"] and a["tab_at_once_from_cache"]
    assert a["same_text"]
    for phase in ("prefill", "decoding"):
        assert r["cancel"][phase]["cancelled"] + r["cancel"][phase]["finished_before_the_cancel"] == 2
    newest, every = r["burst"]["newest_wins"], r["burst"]["all_served"]
    assert every == {**every, "sent": 6, "answered": 6, "cancelled": 0}
    assert newest["answered"] + newest["cancelled"] == 6 and newest["answered"] >= 1
    assert ("newest-wins" in result.stdout and "one-character edit" in result.stdout
            and "cancel in decoding" in result.stdout)
