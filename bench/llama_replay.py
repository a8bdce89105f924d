"""`specd replay`'s typing against llama.cpp's server, driven as llama.vim drives it (llama_vim.py).

    LLAMA_SERVER=/path/to/llama-server .venv/bin/python bench/llama_replay.py bench/typing \\
        --files 10 --cps 8 --pause-ms 1000 --gguf /path/to/qwen2.5-coder-1.5b-instruct.gguf

It starts `$LLAMA_SERVER` on 127.0.0.1 (a free port, one slot, `--cache-reuse 256` as llama.vim's
README advises) with the GGUF of specd's built-in target, types the same passages at the same
pace with the same pauses (bench/typist.py) and reports the same fields (bench/replay_report.py) as
`specd replay` with the same arguments. Without LLAMA_SERVER it says so and exits 0: it is
skipped, not failed. How to build a llama-server: the README, "Against llama.cpp".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from specd.bench.llama_vim import T_MAX_PREDICT_MS, Editor, LlamaServer, context
from specd.bench.replay_report import Keystroke, Outcome, report, write_records
from specd.bench.typist import Passage, add_arguments, passages, schedule
from specd.decoding.errors import UserError

SKIPPED = ("bench/llama_replay.py: skipped: LLAMA_SERVER is not set (the path of a llama-server binary; "
           "the README's 'Against llama.cpp' says how to build one)")


class LlamaError(UserError):
    """llama-server could not be started or answered badly."""


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    binary = os.environ.get("LLAMA_SERVER")
    if not binary:
        print(SKIPPED, file=sys.stderr)
        return 0
    try:
        typed = passages(args)
        gguf = _gguf(args.gguf)
        with llama_server(Path(binary), gguf, args.threads, args.ctx_size) as url:
            outcomes = asyncio.run(replay(LlamaServer(url, n_predict=args.n_predict), typed, args.cps, args.pause_ms,
                                          args.read_ms))
    except UserError as error:
        print(f"llama_replay: {error}", file=sys.stderr)
        return 2
    figures = {"llama.cpp": report(outcomes)}
    if args.records:
        write_records(outcomes, args.records)
    print(f"{'llama.cpp':20} {json.dumps(figures['llama.cpp'])}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    print(json.dumps(figures, indent=1))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(p)
    p.add_argument("--gguf", type=Path, default=os.environ.get("LLAMA_GGUF"),
                   help="the target's GGUF (default $LLAMA_GGUF): the built-in pair's is what specd converts")
    p.add_argument("--n-predict", type=int, default=48,
                   help="tokens at most (default 48, specd's completion.max_tokens)")
    p.add_argument("--threads", type=int, default=2, help="llama-server --threads (default 2)")
    p.add_argument("--ctx-size", type=int, default=8192, help="llama-server --ctx-size (default 8192)")
    return p


def _gguf(path: Path | None) -> Path:
    if path is None:
        raise LlamaError("say which GGUF to serve: --gguf PATH or LLAMA_GGUF=PATH (the built-in target's)")
    if not path.is_file():
        raise LlamaError(f"{path}: no such GGUF file")
    return path


@contextlib.contextmanager
def llama_server(binary: Path, gguf: Path, threads: int, ctx_size: int, start_s: float = 300.0):
    """`binary` serving `gguf` on 127.0.0.1 until the block ends; its log is said if it fails."""
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise LlamaError(f"LLAMA_SERVER={binary} is not an executable file")
    port = _free_port()
    command = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "-c", str(ctx_size),
               "-t", str(threads), "-np", "1", "--cache-reuse", "256", "--no-webui"]
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_healthy(process, f"http://127.0.0.1:{port}", log, start_s)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(process: subprocess.Popen, url: str, log, start_s: float) -> None:
    deadline = time.monotonic() + start_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            tail = "".join(log.readlines()[-15:])
            raise LlamaError(f"llama-server exited with status {process.returncode} while loading:\n{tail}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass  # still loading: 503, or not listening yet
        time.sleep(0.5)
    raise LlamaError(f"llama-server did not answer /health within {start_s:.0f} s")


async def replay(server: LlamaServer, typed: tuple[Passage, ...], cps: float, pause_ms: float,
                 read_ms: float = 0.0) -> list[Outcome]:
    """Type every passage into its own buffer (one result cache for all, as in one Vim), one
    Outcome per passage with what the server said it spent. Each file is read for `read_ms`
    before the first request there (llama.vim asks nothing while the cursor rests)."""
    cache: dict[str, str] = {}
    outcomes = []
    for passage in typed:
        spent = server.model_ms
        editor = Editor(server, cache)
        await asyncio.sleep(read_ms / 1e3)
        outcome = await _type(editor, passage, cps, pause_ms)
        outcome.model_ms = {"done": server.model_ms - spent, "cancelled": 0.0}  # llama.vim cancels nothing
        outcomes.append(outcome)
    return outcomes


async def _type(editor: Editor, passage: Passage, cps: float, pause_ms: float) -> Outcome:
    """The keys of `passage` at the typist's pace; each one moves the cursor as in the editor."""
    warm_ms = await _warm_up(editor, passage) if pause_ms > 0 else None
    outcome = Outcome(passage.file.resolve().as_uri(), started=time.time(), typed_chars=len(passage.typed),
                      warm_ms=warm_ms)
    keys = schedule(passage.typed, cps, pause_ms)
    for i, key in enumerate(keys):
        started = time.perf_counter()
        if outcome.sent:
            outcome.sent[-1].next_at = started
        sent = Keystroke(started, passage.typed[i + 1:] + passage.after, index=i, pause=key.pause)
        outcome.sent.append(sent)
        editor.moved(passage.before + passage.typed[: i + 1], passage.after, sent)
        await asyncio.sleep(max(0.0, key.gap_s - (time.perf_counter() - started)))
    if keys and keys[-1].pause:
        outcome.sent[-1].next_at = outcome.sent[-1].at + keys[-1].gap_s
    editor.sent = None  # what is shown from now on counts for no key
    await editor.settle(timeout_s=editor.server.timeout_s)
    await asyncio.sleep(0.5)
    outcome.ended = time.time()
    if editor.failure is not None:
        raise LlamaError(str(editor.failure))
    return outcome


async def _warm_up(editor: Editor, passage: Passage) -> float:
    """One request at the cursor, waited for, as `specd replay` makes one on opening the passage."""
    started = time.perf_counter()
    ctx = context(passage.before, passage.after)
    try:
        content = await editor.server.infill(ctx, T_MAX_PREDICT_MS)
    except ConnectionError as error:
        raise LlamaError(str(error)) from None
    if content:
        editor.remember(ctx, content)
    return (time.perf_counter() - started) * 1e3


if __name__ == "__main__":
    sys.exit(main())
