"""`specd complete` through the daemon gives what `--no-daemon` gives, and reports its stats."""

from __future__ import annotations

import json
from pathlib import Path

EXAMPLE = Path(__file__).parents[2] / "examples" / "fib.py"


def test_complete_through_the_daemon_matches_no_daemon(daemon):
    args = ("complete", "--file", str(EXAMPLE), "--at", "5:1", "--json")
    through = daemon.specd(*args)
    assert through.returncode == 0, through.stderr
    alone = daemon.specd(*args, "--no-daemon")
    assert alone.returncode == 0, alone.stderr
    a, b = json.loads(through.stdout), json.loads(alone.stdout)
    assert a["outcome"] == b["outcome"] == "done"
    assert a["text"] == b["text"] and a["new_tokens"] == b["new_tokens"] > 0
    for key in ("reused_tokens", "prefilled_tokens", "tokenize_ms", "prefill_ms", "draft_ms", "verify_ms",
                "total_ms", "queue_ms", "round_trip_ms"):
        assert key in a, key


def test_complete_says_clearly_when_no_daemon_answers(fresh_home):
    result = fresh_home.specd("complete", "--file", str(EXAMPLE))
    assert result.returncode == 2
    assert "no specd daemon answers" in result.stderr and "specd start" in result.stderr
    assert "Traceback" not in result.stderr


def test_complete_refuses_a_cursor_outside_the_file(daemon):
    result = daemon.specd("complete", "--file", str(EXAMPLE), "--at", "99:1")
    assert result.returncode == 2 and "outside the file" in result.stderr
