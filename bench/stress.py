"""`specd stress`: N editors typing at once against one daemon, and what held.

It starts a daemon of its own (runtime and state folders under a temporary one, the caller's
configuration and model cache, `--target`/`--draft` if given), then N `specd lsp` processes, each
with its own document, a real Python file cut at a line. Each types that file's real next
characters at `cps` keys a second for `seconds`: after each key a didChange and an inline
completion request, and a `$/cancelRequest` for its previous request if that is still pending,
as VS Code does. The daemon's status is read every second (its memory, its KV caches).

The report: requests sent; `completed` (answered with a result, empty or not; `suggested` of them
had text), `cancelled` (RequestCancelled), `errors` (any other error reply, its messages in
`error_messages`), `late` (still unanswered `grace_s` after the last key: the editor then cancels
them, as one does when it closes, and they count as cancelled or completed by their reply), `lost`
(no reply even then); `crashed` (the daemon stopped answering or was replaced, or a
language server exited); `rss_start_mb` (the first reading after the warm-up: the first quarter
of the run, at most 10 s), `rss_end_mb` (once the last answers are in), `rss_growth` (end over
start, less 1); the largest KV-cache total seen against `engine.cache_memory_mb`; p50/p95 from
keystroke to answer over the completed requests.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from specd.bench.replay import end_position, inline_params, specd_command, utf16_units
from specd.daemon.client import Client
from specd.daemon.config import Config, load_config, render
from specd.daemon.figures import percentile

# Real Python to type: one module a client, in turn.
SOURCES = ("textwrap", "argparse", "string", "shlex", "fnmatch", "json.decoder", "difflib", "calendar")
CANCELLED = -32800   # LSP's RequestCancelled


@dataclass(frozen=True)
class Plan:
    clients: int = 8
    cps: float = 20.0
    seconds: float = 60.0
    grace_s: float = 30.0        # after the last key, for the last answers

    @property
    def warmup_s(self) -> float:
        return min(10.0, self.seconds / 4)


@dataclass
class Pending:
    """One request an editor sent, until its answer (or the editor's cancel)."""
    at: float
    msg_id: str
    future: asyncio.Future = field(repr=False)
    answered: float | None = None
    outcome: str | None = None   # completed, cancelled, error
    suggested: bool = False
    error: str | None = None     # an error reply's message
    late: bool = False           # unanswered grace_s after the last key, so cancelled by the editor


@dataclass
class Readings:
    """The daemon's status, read every second."""
    pid: int | None = None
    rss_mb: list[tuple[float, float]] = field(default_factory=list)   # (seconds since start, MB)
    cache_mb_max: float = 0.0
    cache_documents_max: int = 0
    failed: str | None = None    # why the daemon was judged crashed


def world(config: Config, root: Path) -> Path:
    """A config file for a daemon of its own under `root`: the same models and settings, its own
    socket and state, no TCP."""
    daemon = msgspec.structs.replace(config.daemon, socket=str(root / "run" / "specd.sock"),
                                     state_dir=str(root / "state"), tcp_port=0, trace=True)
    models = msgspec.structs.replace(config.models, cache_dir=str(config.cache_dir()))
    path = root / "config.toml"
    path.write_text(render(msgspec.structs.replace(config, daemon=daemon, models=models)))
    return path


def passage(index: int, chars: int) -> tuple[str, str, str]:
    """(text before the cursor, the characters to type, the text after them) for client `index`."""
    source = inspect.getsource(importlib.import_module(SOURCES[index % len(SOURCES)]))
    lines = source.splitlines(keepends=True)
    cut = sum(len(line) for line in lines[: len(lines) // 3])
    rest = source[cut:] * (chars // max(1, len(source) - cut) + 1)
    return source[:cut], rest[:chars], source[cut + chars:] if cut + chars < len(source) else ""


async def type_into(command: list[str], index: int, plan: Plan, started: float) -> tuple[list[Pending], str | None]:
    """One editor: start its server, open its document, type, wait for the answers; returns the
    requests, and how its server ended if it did not live to the end (None: it did)."""
    client = LanguageClient(f"specd-stress-{index}", "0.1")
    await client.start_io(*command)
    server = client._server   # pygls keeps the process private; its stderr must be read, or a
    tail: list[bytes] = []    # chatty server blocks once the pipe is full
    drain = asyncio.ensure_future(_drain(server.stderr, tail))
    sent: list[Pending] = []
    try:
        await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
        client.initialized(types.InitializedParams())
        before, typed, after = passage(index, int(plan.cps * plan.seconds) + 1)
        uri = f"file:///specd-stress/{index}/{SOURCES[index % len(SOURCES)]}.py"
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
            uri=uri, language_id="python", version=1, text=before + after)))
        await _type(client, uri, before, typed, plan, started, sent)
        pending = [s for s in sent if s.outcome is None]
        if pending:
            await asyncio.wait([s.future for s in pending], timeout=plan.grace_s)
        # what is still unanswered is cancelled, as an editor does when it closes: its reply (or
        # none, which counts as lost) is waited for before the server is shut down
        if pending := [s for s in sent if s.outcome is None]:
            for s in pending:
                s.late = True
                client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=s.msg_id))
            await asyncio.wait([s.future for s in pending], timeout=30)
        ended = None if server.returncode is None else \
            f"exited with {server.returncode}: {b''.join(tail).decode(errors='replace')[-2000:]}"
        if ended is None:
            await asyncio.wait_for(client.shutdown_async(None), 30)
            client.exit(None)
    finally:
        await client.stop()
        await drain
    return sent, ended


async def _drain(stream: asyncio.StreamReader, tail: list[bytes]) -> None:
    while line := await stream.readline():
        tail.append(line)
        del tail[:-20]


async def _type(client, uri: str, before: str, typed: str, plan: Plan, started: float, sent: list[Pending]) -> None:
    line, character = end_position(before)
    for i, char in enumerate(typed):
        due = started + i / plan.cps
        if due - started > plan.seconds:
            break
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        if sent and sent[-1].outcome is None:
            client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=sent[-1].msg_id))
        position = types.Position(line, character)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=i + 2),
            [types.TextDocumentContentChangePartial(range=types.Range(position, position), text=char)]))
        line, character = (line + 1, 0) if char == "\n" else (line, character + utf16_units(char))
        msg_id = str(uuid.uuid4())
        future = client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, line, character), msg_id=msg_id)
        record = Pending(time.perf_counter(), msg_id, future)
        future.add_done_callback(lambda f, r=record: _answered(f, r))
        sent.append(record)


def _answered(future: asyncio.Future, record: Pending) -> None:
    record.answered = time.perf_counter()
    if future.cancelled():
        record.outcome = "cancelled"
    elif (error := future.exception()) is not None:
        record.outcome = "cancelled" if getattr(error, "code", None) == CANCELLED else "error"
        record.error = None if record.outcome == "cancelled" else str(error)
    else:
        record.outcome = "completed"
        result = future.result()
        record.suggested = bool(getattr(result, "items", None))


async def watch(config_path: Path, readings: Readings, started: float, stop: asyncio.Event) -> None:
    """Read the daemon's status every second until `stop`; a daemon that stops answering or comes
    back with another pid is a crash."""
    config = load_config(config_path)
    while True:
        try:
            client = await Client.connect(config, timeout=10)
            try:
                status = await asyncio.wait_for(client.status(), 10)
            finally:
                await client.close()
        except (ConnectionError, TimeoutError) as error:
            readings.failed = readings.failed or f"the daemon stopped answering: {error}"
            return
        if readings.pid is None:
            readings.pid = status.pid
        elif status.pid != readings.pid:
            readings.failed = readings.failed or f"the daemon was replaced (pid {readings.pid}, then {status.pid})"
        readings.rss_mb.append((time.perf_counter() - started, status.rss_mb))
        readings.cache_mb_max = max(readings.cache_mb_max, status.cache_mb)
        readings.cache_documents_max = max(readings.cache_documents_max, status.cache_documents)
        if stop.is_set():
            return
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass


async def stress(plan: Plan, config_path: Path) -> dict:
    """The run, against a daemon that `specd --config config_path start` starts (and stop stops)."""
    specd = specd_command(config_path)[:-1]   # `specd --config FILE`
    begun = await asyncio.to_thread(subprocess.run, [*specd, "start"], capture_output=True, text=True)
    if begun.returncode != 0:
        raise RuntimeError(f"the daemon did not start: {begun.stderr.strip()}")
    readings, stop = Readings(), asyncio.Event()
    started = time.perf_counter()
    watcher = asyncio.ensure_future(watch(config_path, readings, started, stop))
    try:
        runs = await asyncio.gather(*(type_into([*specd, "lsp"], i, plan, started) for i in range(plan.clients)))
        stop.set()
        await watcher
    finally:
        await asyncio.to_thread(subprocess.run, [*specd, "stop"], capture_output=True)
    return report(plan, load_config(config_path), runs, readings)


def report(plan: Plan, config: Config, runs: list[tuple[list[Pending], str | None]], readings: Readings) -> dict:
    sent = [s for requests, _ in runs for s in requests]
    count = lambda outcome: sum(s.outcome == outcome for s in sent)  # noqa: E731
    latencies = [(s.answered - s.at) * 1e3 for s in sent if s.outcome == "completed"]
    after = [mb for t, mb in readings.rss_mb if t >= plan.warmup_s] or [mb for _, mb in readings.rss_mb[-1:]]
    start_mb, end_mb = (after[0], after[-1]) if after else (None, None)
    exits = [ended for _, ended in runs if ended is not None]
    return {
        "clients": plan.clients, "cps": plan.cps, "seconds": plan.seconds,
        "target": config.models.target, "draft": config.models.draft,
        "requests": len(sent), "completed": count("completed"), "suggested": sum(s.suggested for s in sent),
        "cancelled": count("cancelled"), "errors": count("error"), "lost": sum(s.outcome is None for s in sent),
        "late": sum(s.late for s in sent),
        "error_messages": sorted({s.error for s in sent if s.error})[:5],   # what went wrong, a few distinct
        "crashed": readings.failed is not None or bool(exits),
        "crash": readings.failed or (f"{len(exits)} language servers ended early; one {exits[0]}" if exits else None),
        "rss_start_mb": _round(start_mb), "rss_end_mb": _round(end_mb),
        "rss_growth": round(end_mb / start_mb - 1, 4) if start_mb else None,
        "cache_mb_max": round(readings.cache_mb_max, 1), "cache_documents_max": readings.cache_documents_max,
        "cache_memory_mb": config.engine.cache_memory_mb,
        "p50_ms": _round(percentile(latencies, 50)), "p95_ms": _round(percentile(latencies, 95)),
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)
