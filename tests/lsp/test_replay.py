"""`specd replay`: an editor played against `specd lsp` (tiny models, a daemon of its own)."""

from __future__ import annotations

import json
import os

import pytest

from specd.bench.replay import Replay, replay, specd_command
from specd.bench.typist import Passage, sample, schedule
from specd.daemon.trace_report import model_time
from specd.daemon.tracing import read_trace
from specd.lsp.cursor import PositionError

SOURCE = ("def area(width, height):\n    return width * height\n\n\n"
          "def perimeter(width, height):\n    return 2 * (width + height)\n")


def test_the_typed_characters_are_cut_out_between_before_and_after(tmp_path):
    job = Passage.of(tmp_path / "shapes.py", SOURCE, "6:5", 6)
    assert job.before.endswith("(width, height):\n    ") and job.typed == "return" and job.after.startswith(" 2 * (")
    with pytest.raises(PositionError, match="outside"):
        Passage.of(tmp_path / "shapes.py", SOURCE, "60:1", 3)
    with pytest.raises(PositionError, match="characters follow"):
        Passage.of(tmp_path / "shapes.py", SOURCE, "6:5", 500)


@pytest.mark.parametrize("reuse_and_cancel", [True, False], ids=["default", "no-reuse-no-cancel"])
async def test_replay_reports_what_the_keyboard_felt(specd_env, tmp_path, reuse_and_cancel):
    file = tmp_path / "shapes.py"
    file.write_text(SOURCE)
    job = Replay((Passage.of(file, SOURCE, "6:5", 6),), cps=20, reuse=reuse_and_cancel, cancel=reuse_and_cancel,
                 timeout_s=120)
    [outcome] = await replay(job, specd_command(), env={**os.environ, **specd_env.env})
    outcome.model_ms = model_time(read_trace(specd_env.paths().trace), outcome.uri, outcome.started, outcome.ended)
    report = outcome.report()
    assert report["sent"] == len(outcome.sent) == 6
    assert [s.truth for s in outcome.sent][0].startswith("eturn 2 * (")
    assert outcome.sent[-1].answered_at is not None, "the last keystroke's request is answered"

    # What the report counts, counted here from what the server sent back: a suggestion with text.
    with_text = [s for s in outcome.sent if s.answered_at is not None and s.text.strip()]
    assert with_text, "some keystroke got a suggestion (else the figures below say nothing)"
    assert report["answered"] == len(with_text)    # the share and the rest: test_typist.py, by hand
    latencies = sorted((s.answered_at - s.at) * 1e3 for s in with_text)
    assert round(latencies[0], 1) <= report["p50_ms"] <= report["p95_ms"] <= round(latencies[-1], 1)
    if reuse_and_cancel:
        assert report["cancelled_by_client"] >= 1
    else:
        assert report["cancelled_by_client"] == 0
        assert all(s.answered_at is not None for s in outcome.sent), "without cancelling, every request is answered"
        assert report["model_s_cancelled"] == 0.0, "nothing is cancelled when cancelling is off"
    assert report["model_s_done"] > 0


def test_a_replay_with_pauses_across_a_folder_reports_each_pause(specd_env, tmp_path):
    """`specd replay FOLDER --files 3 --pause-ms P`: one run over places in two languages, the
    pause figures counted from what the server sent back at each pause."""
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "shapes.py").write_text(SOURCE)
    (folder / "shapes.js").write_text("function area(width, height) {\n  return width * height\n}\n\n"
                                      "function perimeter(width, height) {\n  return 2 * (width + height)\n}\n")
    out = tmp_path / "report.json"
    done = specd_env.specd("replay", str(folder), "--files", "3", "--chars", "8", "--cps", "20",
                           "--pause-ms", "400", "--json", str(out), "--records", str(tmp_path / "keys.jsonl"))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())["replay"]
    keys = [json.loads(line) for line in (tmp_path / "keys.jsonl").read_text().splitlines()]
    assert len(keys) == report["sent"] and sum(k["shown"] and k["pause"] for k in keys) == report["shown"], \
        "--records holds every keystroke the report counted"
    passages = sample(folder, 3, 8, seed=0)
    assert {p.language for p in passages} == {"python", "javascript"}
    pauses = sum(k.pause for p in passages for k in schedule(p.typed, 20, 400))
    assert report["passages"] == 3 and report["sent"] == 24 and report["chars_typed"] == 24
    assert report["pauses"] == pauses >= 3, "at least the last key of each passage is a pause"
    assert 1 <= report["shown"] <= pauses, "ghost text arrived in some pause (else the figures say nothing)"
    assert report["warm_p50_ms"] > 0, "each passage was opened with a request waited for"
    assert 0 < report["pause_p50_ms"] <= report["pause_p95_ms"]
    assert 0 <= report["chars_saved"] <= 24


def test_replay_counts_the_requests_the_trigger_lets_through(specd_env, tmp_path):
    """`--delay-ms` and `--max-line-suffix` set the server's trigger rules for the run, and
    daemon_requests (from the daemon's trace) counts what reached the daemon."""
    file = tmp_path / "shapes.py"
    file.write_text(SOURCE)

    def run(*knobs: str) -> dict:
        out = tmp_path / "report.json"
        done = specd_env.specd("replay", str(file), "--at", "6:5", "--chars", "6", "--cps", "20", *knobs,
                               "--json", str(out))
        assert done.returncode == 0, done.stderr
        return json.loads(out.read_text())["replay"]

    # Without cancelling (--no-cancel) no request is dropped before it is sent, however long the
    # daemon takes to start: each key's request (or, typed through, its check) reaches it.
    plain = run("--no-cancel")
    assert plain["sent"] == 6 and plain["daemon_requests"] == 6, plain
    # Keys 50 ms apart, each request waiting a second: only the last key's is ever sent.
    delayed = run("--no-cancel", "--delay-ms", "1000")
    assert delayed["sent"] == 6 and delayed["daemon_requests"] == 1, delayed
    # " 2 * (width + height)" is right of the cursor: 15 characters that count, more than 8.
    held = run("--max-line-suffix", "8")
    assert held["sent"] == 6 and held["daemon_requests"] == 0 and held["answered"] == 0, held


def test_replay_refuses_a_command_line_it_cannot_serve(specd_env, tmp_path):
    file = tmp_path / "shapes.py"
    file.write_text(SOURCE)
    for args, said in [((str(file),), "--at LINE:COL"),
                       ((str(file), "--at", "6:5", "--files", "2"), "one or the other"),
                       ((str(tmp_path / "nothing"), "--files", "2"), "does not exist"),
                       ((str(file), "--files", "900"), "places to type"),
                       ((str(file), "--at", "6:5", "--pause-ms", "-1"), "not negative"),
                       ((str(file), "--at", "6:5", "--chars", "6", "--delay-ms", "-1"), "--delay-ms must be 0..10000"),
                       ((str(file), "--at", "6:5", "--chars", "6", "--max-line-suffix", "-3"),
                        "--max-line-suffix must be -1")]:
        done = specd_env.specd("replay", *args)
        assert done.returncode == 2 and said in done.stderr, (args, done.stderr)
