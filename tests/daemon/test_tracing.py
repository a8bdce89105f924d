"""The latency trace: every line parses, its phases add up to its total, `specd trace` reads it."""

from __future__ import annotations

import re

import msgspec

from specd.daemon import protocol
from specd.daemon.client import new_request_id
from specd.daemon.trace_html import render_page
from specd.daemon.trace_report import Taken, summary, taken
from specd.daemon.tracing import PHASES, TraceRecord, TraceWriter, UptakeRecord, read_trace, read_uptake
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


def request(id: int, client: int, at: float, ms: float = 100.0) -> TraceRecord:
    return TraceRecord(id=id, client=client, document="file:///a.py", language="python", drafter="hybrid",
                       received_at=at, outcome="done", cause=None, error=None, stop_reason="newline", queue_ms=0.0,
                       other_ms=0.0, reply_ms=0.0, total_ms=ms, passes=1, passes_after_cancel=None, stats=Stats())


def report(at: float, client: int, req: int | None, event: str, chars: int, first: bool = True,
           how: str = "") -> UptakeRecord:
    return UptakeRecord(at, client, req, event, chars, first, "python", how)


def test_uptake_reports_join_the_newest_request_of_their_connection_and_id():
    """A restarted daemon numbers connections and ids afresh: (1, 7) before and after a restart are
    two requests, and each report belongs to the newest one received before it."""
    records = [request(7, 1, at=10.0, ms=300.0), request(8, 1, at=11.0), request(7, 1, at=50.0, ms=90.0)]
    uptake = [report(10.5, 1, 7, "shown", 20), report(10.6, 1, 7, "partial", 5),
              report(10.7, 1, 7, "accepted", 15, False),
              report(11.5, 1, 8, "shown", 9), report(12.0, 2, 8, "shown", 4),   # another connection's 8: none here
              report(11.8, 1, 8, "dismissed", 9, how="typed over"),
              report(50.5, 1, 7, "shown", 12), report(51.0, 1, None, "shown", 3)]
    assert taken(records, uptake) == {0: Taken(1, 20, 20), 1: Taken(1, 9, 0, "typed over"), 2: Taken(1, 12, 0)}
    text = summary(records, uptake)
    assert ("suggestions: 5 shown, 1 taken (20%): 1 whole, 1 in part; 20 of 48 characters (42%); "
            "1 dismissed (0 escaped)") in text
    assert "answers shown: 3 requests; time to result p50 of those taken 300.0 ms, of the rest 95.0 ms" in text
    page = render_page(records, "t", uptake=uptake)
    assert "took 20 of 20" in page and page.count("shown, not taken") == 2
    assert page.count("shown, not taken, then typed over") == 1
    assert page.count("<svg") == 3, "histogram, waterfall, uptake over time"


def test_without_reports_the_trace_says_so():
    assert "suggestions: no editor reported one shown" in summary([request(1, 1, 0.0)], [])
    assert "no editor reported a suggestion shown yet" in render_page([request(1, 1, 0.0)], "t")


def test_uptake_lines_and_requests_share_the_file_and_each_reader_skips_the_other(tmp_path):
    path = tmp_path / "trace.jsonl"
    writer = TraceWriter(path, max_bytes=1 << 20)
    writer.write(request(1, 1, 0.0))
    writer.write(report(1.0, 1, 1, "shown", 5))
    writer.write(request(2, 1, 2.0))
    assert [r.id for r in read_trace(path)] == [1, 2]
    assert read_uptake(path) == [report(1.0, 1, 1, "shown", 5)]
    assert b'"kind":"uptake"' in path.read_bytes()
