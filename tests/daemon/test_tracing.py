"""The latency trace: every line parses, its phases add up to its total, `specd trace` reads it."""

from __future__ import annotations

import re

import msgspec

from specd.daemon import protocol
from specd.daemon.client import new_request_id
from specd.daemon.tracing import PHASES, TraceRecord, TraceWriter, read_trace
from specd.decoding.stats import Stats, Step
from tests.daemon.conftest import trace_of

EPSILON_MS = 1e-6


async def traced_requests(daemon, client, document: str) -> list[TraceRecord]:
    # each its own limit: the same request again would be answered from the suggestion cache
    for i, drafter in enumerate(("hybrid", "lookup", "draft", "none")):
        await client.complete(protocol.Complete(id=new_request_id(), document=document, drafter=drafter,
                                                prefix="import json\n\ndef load(path):\n    ", max_tokens=12 + i))
    return await trace_of(daemon, document, 4)


async def test_trace_lines_parse_and_their_phases_add_up(daemon, client):
    lines = await traced_requests(daemon, client, "file:///traced.py")
    raw = daemon.paths().trace.read_bytes().splitlines()
    assert all(msgspec.json.decode(line) for line in raw), "every line is JSON"
    assert [line.drafter for line in lines] == ["hybrid", "lookup", "draft", "none"]
    for line in lines:
        phases = [line.phase_ms(p) for p in PHASES]
        assert min(phases) >= -EPSILON_MS, f"no phase is negative (none overlaps another): {line}"
        assert abs(sum(phases) - line.total_ms) < 1e-3, f"phases add up to the total: {line}"
        s = line.stats
        assert abs(sum(step.draft_ms for step in s.steps) - s.draft_ms) < 1e-3
        assert abs(sum(step.verify_ms for step in s.steps) - s.verify_ms) < 1e-3
        assert line.outcome == "done" and s.steps and s.prompt_tokens > 0
        assert s.reused_tokens + s.prefilled_tokens == s.prompt_tokens - 1
    assert lines[1].stats.reused_tokens > 0, "the same prompt again reuses the cache"


async def test_specd_trace_summarises_and_draws(daemon, client, tmp_path):
    await traced_requests(daemon, client, "file:///summary.py")
    records = read_trace(daemon.paths().trace)
    result = daemon.specd("trace")
    assert result.returncode == 0, result.stderr
    assert f"{len(records)} requests:" in result.stdout
    for phase in (*PHASES, "total"):
        assert re.search(rf"^{phase} +[\d.]+ +[\d.]+", result.stdout, re.M), f"a row of percentiles for {phase}"
    assert re.search(r"^lookup +\d+ +\d+ +\d+ +[\d.]+", result.stdout, re.M), "acceptance per drafter"

    page = tmp_path / "trace.html"
    assert daemon.specd("trace", "--html", str(page)).returncode == 0
    html = page.read_text()
    assert html.count("<svg") == 2, "a histogram and a waterfall"
    for external in ("http:", "https:", "src=", "href=", "<script", "url(", "@import"):
        assert external not in html, f"self-contained: no {external}"
    assert html.count('<text x="0"') == min(len(records), 150), "one waterfall row per request"


def test_the_trace_rotates_within_its_cap(tmp_path):
    path = tmp_path / "trace.jsonl"
    writer = TraceWriter(path, max_bytes=8192)
    line = TraceRecord(id=0, client=1, document="d", language="", drafter="none", received_at=0.0,
                       outcome="done", cause=None, error=None, stop_reason="max_tokens", queue_ms=0.0,
                       other_ms=0.0, reply_ms=0.0, total_ms=0.0, passes=0, passes_after_cancel=None,
                       stats=Stats(steps=[Step("lookup", 3, 2, 0.1, 0.2)]))
    for n in range(400):
        writer.write(msgspec.structs.replace(line, id=n))
    rotated = path.with_name("trace.jsonl.1")
    assert rotated.exists()
    size = len(msgspec.json.encode(line)) + 8
    assert path.stat().st_size <= 4096 + size and rotated.stat().st_size <= 4096 + size
    ids = [r.id for r in read_trace(path)]
    assert ids == list(range(ids[0], 400)), "oldest first, the newest kept"
