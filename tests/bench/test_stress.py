"""`specd stress` end to end on the tiny models: real `specd lsp` processes typing against a daemon
of its own; and how its report counts what was lost and what crashed."""

from __future__ import annotations

import json
import os
import subprocess

from specd.bench.stress import Pending, Plan, Readings, report
from specd.daemon.config import Config
from tests.homes import SPECD


def test_two_editors_typing_lose_nothing_and_the_daemon_holds(tiny_target, tiny_draft, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[models]\ndevice = "cpu"\n[engine]\ncache_memory_mb = 64\n')   # builtin models otherwise
    out = tmp_path / "stress.json"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([SPECD, "--config", str(config), "stress", "--clients", "2", "--cps", "4", "--seconds", "5",
                           "--target", str(tiny_target), "--draft", str(tiny_draft), "--json", str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    r = json.loads(out.read_text())
    assert (r["clients"], r["cps"], r["seconds"], r["target"]) == (2, 4.0, 5.0, str(tiny_target))
    assert r["requests"] >= 2 * 4 * 5 and r["requests"] == r["completed"] + r["cancelled"] + r["errors"] + r["lost"]
    assert r["lost"] == 0 and r["errors"] == 0 and r["error_messages"] == [] and not r["crashed"], r
    assert r["completed"] >= 2, "each client's last key is answered"
    assert 0 < r["rss_start_mb"] and 0 < r["rss_end_mb"] and r["rss_growth"] is not None
    assert 0 < r["cache_mb_max"] <= r["cache_memory_mb"] == 64
    assert r["p50_ms"] is not None and r["p95_ms"] >= r["p50_ms"]


def test_the_report_counts_requests_never_answered_and_a_server_that_died():
    runs = [([Pending(0.0, "a", None, answered=0.1, outcome="completed"), Pending(0.2, "b", None)], None),
            ([Pending(0.0, "c", None, answered=0.3, outcome="cancelled")], "exited with -9: killed")]
    readings = Readings(pid=1, rss_mb=[(1.0, 90.0), (3.0, 100.0), (9.0, 110.0)], cache_mb_max=5.0)
    r = report(Plan(clients=2, cps=1, seconds=8), Config(), runs, readings)
    assert (r["requests"], r["completed"], r["cancelled"], r["lost"]) == (3, 1, 1, 1)
    assert r["crashed"] and "exited with -9" in r["crash"]
    assert (r["rss_start_mb"], r["rss_end_mb"], r["rss_growth"]) == (100.0, 110.0, 0.1), "growth after the warm-up"
    assert not report(Plan(2, 1, 8), Config(), runs[:1], Readings(failed=None))["crashed"]
    assert report(Plan(2, 1, 8), Config(), runs[:1], Readings(failed="stopped answering"))["crashed"]
