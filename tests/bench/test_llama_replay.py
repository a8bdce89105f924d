"""bench/llama_replay.py: llama.vim's context, cache and rendering, the skip without a server, and,
where LLAMA_SERVER and LLAMA_GGUF name a real llama-server and GGUF, one small replay against it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specd.bench import llama_replay
from specd.bench.llama_vim import LOOKBACK_CHARS, N_PREFIX_LINES, LlamaServer, context, lookup, render
from specd.bench.replay_report import report
from specd.bench.typist import sample

ROOT = Path(__file__).resolve().parents[2]


def test_the_context_is_llama_vims_lines_around_the_cursor():
    ctx = context("import os\n\ndef walk(top):\n    for na", "me in os.listdir(top):\n        yield name\n")
    assert ctx.prefix == "import os\n\ndef walk(top):\n", "whole lines before the cursor's line"
    assert ctx.middle == "    for na", "the cursor's line up to the cursor is the prompt"
    assert ctx.suffix == "me in os.listdir(top):\n        yield name\n\n"
    long = context("x = 1\n" * (N_PREFIX_LINES + 10) + "y", "")
    assert long.prefix.count("\n") == N_PREFIX_LINES, "at most N_PREFIX_LINES lines before"
    blank = context("def f():\n    ", "\nreturn\n")
    assert blank.middle == "" and blank.suffix.startswith("\n"), "a blank line asks from its beginning"
    assert blank.line == "    "


def test_typing_into_a_cached_answer_shows_its_rest():
    asked = context("def area(w, h):\n    ", "\n")
    cache = {asked.key: "    return w * h"}
    assert lookup(cache, asked) == "    return w * h"
    typed = context("def area(w, h):\n    ret", "\n")
    assert typed.middle == "    ret"
    # the answer was made on the blank line, its middle "": typed since are "    ret"
    assert lookup(cache, typed) == "urn w * h"
    assert lookup(cache, context("def area(w, h):\n    rex", "\n")) is None, "typed text that is not its start"
    assert lookup(cache, context("def area(w, h):\n    ret", "\nother\n")) is None, "another suffix"
    start = context("s = y", "\n")
    long = {start.key: "x" * (LOOKBACK_CHARS + 10)}
    assert lookup(long, context("s = y" + "x" * LOOKBACK_CHARS, "\n")) == "x" * 10
    assert lookup(long, context("s = y" + "x" * (LOOKBACK_CHARS + 1), "\n")) is None, "no further back than that"
    # of two cached places behind the cursor, the longer rest is shown
    nearer = context("def area(w, h):\n    re", "\n")
    cache[nearer.key] = "turn w * h + 0"
    assert lookup(cache, typed) == "urn w * h + 0"


def test_on_a_blank_line_the_indent_there_is_not_shown_again():
    assert render("        yield name\n\n", context("for n in x:\n    ", "\n")) == "    yield name"
    assert render("yield name", context("for n in x:\n    yi", "\n")) == "yield name"


def test_without_llama_server_the_replay_is_skipped_and_says_why(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_SERVER"}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "llama_replay.py"), str(ROOT / "bench" / "typing"),
                           "--files", "2"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "skipped: LLAMA_SERVER is not set" in done.stderr, done.stderr
    assert done.stdout == "", "no report without a server"


def test_a_command_line_it_cannot_serve_is_refused(tmp_path):
    env = {**os.environ, "LLAMA_SERVER": str(tmp_path / "no-such-llama-server")}
    env.pop("LLAMA_GGUF", None)
    for args, said in [(["--files", "2"], "say which GGUF"),
                       (["--files", "2", "--gguf", str(tmp_path / "none.gguf")], "no such GGUF"),
                       (["--at", "1:1", "--files", "2"], "one or the other")]:
        done = subprocess.run([sys.executable, str(ROOT / "bench" / "llama_replay.py"),
                               str(ROOT / "bench" / "typing"), *args], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and said in done.stderr, (args, done.stderr)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "llama_replay.py"), str(ROOT / "bench" / "typing"),
                           "--files", "1", "--gguf", str(gguf)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "not an executable file" in done.stderr, done.stderr


@pytest.mark.skipif(not (os.environ.get("LLAMA_SERVER") and os.environ.get("LLAMA_GGUF")),
                    reason="LLAMA_SERVER (a llama-server binary) and LLAMA_GGUF (the built-in target's GGUF) "
                           "are not both set; see the README, 'Against llama.cpp'")
def test_a_replay_against_a_real_llama_server_reports_every_pause():
    typed = tuple(sample(ROOT / "bench" / "typing", 2, 10, seed=1))
    with llama_replay.llama_server(Path(os.environ["LLAMA_SERVER"]), Path(os.environ["LLAMA_GGUF"]),
                                   threads=2, ctx_size=4096) as url:
        server = LlamaServer(url, n_predict=16)
        outcomes = asyncio.run(llama_replay.replay(server, typed, cps=20, pause_ms=300))
    figures = report(outcomes)
    assert figures["passages"] == 2 and figures["sent"] == figures["chars_typed"] == 20
    assert figures["pauses"] >= 2, "at least the last key of each passage"
    assert figures["warm_p50_ms"] > 0 and figures["model_s_done"] > 0, "the server answered and said its time"
    assert server.most_in_flight == 1, "llama.vim never has two requests in flight"
    assert 0 <= figures["chars_saved"] <= 20
    with pytest.raises(OSError):  # the server is gone with the block
        import urllib.request
        urllib.request.urlopen(f"{url}/health", timeout=2)
