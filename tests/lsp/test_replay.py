"""`specd replay`: an editor played against `specd lsp` (tiny models, a daemon of its own)."""

from __future__ import annotations

import os

import pytest

from specd.daemon.cursor import PositionError
from specd.daemon.trace_report import model_time
from specd.daemon.tracing import read_trace
from specd.lsp.replay import Replay, replay, specd_command

SOURCE = "def area(width, height):\n    return width * height\n\n\ndef perimeter(width, height):\n    return 2 * (width + height)\n"


def test_the_typed_characters_are_cut_out_between_before_and_after(tmp_path):
    job = Replay.of(tmp_path / "shapes.py", SOURCE, "6:5", 6)
    assert job.before.endswith("(width, height):\n    ") and job.typed == "return" and job.after.startswith(" 2 * (")
    with pytest.raises(PositionError, match="outside"):
        Replay.of(tmp_path / "shapes.py", SOURCE, "60:1", 3)
    with pytest.raises(PositionError, match="characters follow"):
        Replay.of(tmp_path / "shapes.py", SOURCE, "6:5", 500)


@pytest.mark.parametrize("reuse_and_cancel", [True, False], ids=["default", "no-reuse-no-cancel"])
async def test_replay_reports_what_the_keyboard_felt(specd_env, tmp_path, reuse_and_cancel):
    file = tmp_path / "shapes.py"
    file.write_text(SOURCE)
    job = Replay.of(file, SOURCE, "6:5", 6, cps=20, reuse=reuse_and_cancel, cancel=reuse_and_cancel, timeout_s=120)
    outcome = await replay(job, specd_command(), env={**os.environ, **specd_env.env})
    outcome.model_ms = model_time(read_trace(specd_env.paths().trace), outcome.uri, outcome.started, outcome.ended)
    report = outcome.report()
    assert report["sent"] == len(outcome.sent) == 6
    assert [s.truth for s in outcome.sent][0].startswith("eturn 2 * (")
    assert outcome.sent[-1].answered_at is not None, "the last keystroke's request is answered"

    # What the report counts, counted here from what the server sent back: a suggestion with text.
    with_text = [s for s in outcome.sent if s.answered_at is not None and s.text.strip()]
    assert with_text, "some keystroke got a suggestion (else the figures below say nothing)"
    assert report["answered"] == len(with_text)
    assert report["answered_share"] == round(len(with_text) / 6, 3) > 0
    latencies = sorted((s.answered_at - s.at) * 1e3 for s in with_text)
    assert round(latencies[0], 1) <= report["p50_ms"] <= report["p95_ms"] <= round(latencies[-1], 1)
    if reuse_and_cancel:
        assert report["cancelled_by_client"] >= 1
    else:
        assert report["cancelled_by_client"] == 0
        assert all(s.answered_at is not None for s in outcome.sent), "without cancelling, every request is answered"
        assert report["model_s_cancelled"] == 0.0, "nothing is cancelled when cancelling is off"
    assert report["model_s_done"] > 0
