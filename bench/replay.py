"""`specd replay`: play an editor against `specd lsp` and measure what a person at the keyboard feels.

It starts `specd lsp` as a subprocess (which starts the daemon) and, for each passage (typist.py),
opens its file cut at the cursor (the text after the cursor stays as the suffix, minus the
characters to type), then types the real next characters at `cps` keys a second, pausing after
each word if told to. After each key it sends didChange and an inline completion request, and
cancels the previous request if it is still pending, as VS Code does. The figures are
replay_report.py's.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from specd.bench.replay_report import Keystroke, Outcome
from specd.bench.typist import Passage, schedule
from specd.lsp.focus import DID_FOCUS


@dataclass(frozen=True)
class Replay:
    passages: tuple[Passage, ...]  # typed one after the other, in one session of the server
    cps: float = 10.0
    pause_ms: float = 0.0         # after each word (typist.schedule); 0: an even stream of keys
    reuse: bool = True
    cancel: bool = True
    prefetch: bool = True         # the accept branch of each suggestion shown (never taken here)
    warm: bool = True             # the server reads a document ahead on opening and where the cursor rests
    read_ms: float = 0.0          # between opening a file and the first request there: a person reads
    # the server's [trigger] delay_ms and max_line_suffix for this run (None: the config's)
    delay_ms: int | None = None
    max_line_suffix: int | None = None
    timeout_s: float = 300.0

    def options(self) -> dict:
        """The initializationOptions that set the server up as this replay says."""
        trigger = {name: value for name, value in (("delay_ms", self.delay_ms),
                                                    ("max_line_suffix", self.max_line_suffix)) if value is not None}
        return {"reuse": self.reuse, "cancel": self.cancel, "prefetch": self.prefetch, "warm": self.warm,
                "trigger": trigger}


async def replay(job: Replay, command: list[str], env: dict | None = None) -> list[Outcome]:
    """Type as `job` says into the server that `command` starts, one Outcome per passage. What the
    daemon spent on the requests (`Outcome.model_ms`) is for the caller to add from its trace: it
    is not the editor's."""
    client = LanguageClient("specd-replay", "0.1")
    await client.start_io(*command, env=env)
    outcomes = []
    try:
        await client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(), initialization_options=job.options()))
        client.initialized(types.InitializedParams())
        for passage in job.passages:
            outcomes.append(await _type_passage(client, job, passage))
        await asyncio.wait_for(client.shutdown_async(None), 30)
        client.exit(None)
    finally:
        await client.stop()
    return outcomes


async def _type_passage(client, job: Replay, passage: Passage) -> Outcome:
    """Open the passage's file cut at its cursor, put the cursor there (as specd's editor clients
    say: lsp/focus.py), read for `read_ms`, type, close (the server then forgets what it showed
    there; the daemon keeps the file's cache, as for a file one comes back to)."""
    uri = passage.file.resolve().as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri, language_id=passage.language, version=1, text=passage.before + passage.after)))
    line, character = end_position(passage.before)
    client.protocol.notify(DID_FOCUS, {"textDocument": {"uri": uri},
                                       "position": {"line": line, "character": character}})
    await asyncio.sleep(job.read_ms / 1e3)
    warm_ms = await _warm_up(client, uri, passage, job) if job.pause_ms > 0 else None
    outcome = Outcome(uri, started=time.time(), typed_chars=len(passage.typed), warm_ms=warm_ms)
    await _type(client, uri, job, passage, outcome)
    await asyncio.sleep(0.5)  # the daemon's requests for it are answered by then
    outcome.ended = time.time()
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    return outcome


async def _warm_up(client, uri: str, passage: Passage, job: Replay) -> float:
    """One request at the cursor, waited for, before the first key: the person has had the file
    open for a while, so its first reading is not charged to the first pause. It stands for that
    reading, not for a key: asked as by hand, so the trigger rules neither delay nor hold it."""
    started = time.perf_counter()
    line, character = end_position(passage.before)
    await asyncio.wait_for(client.protocol.send_request_async(
        types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, line, character, invoked=True)), job.timeout_s)
    return (time.perf_counter() - started) * 1e3


def inline_params(uri: str, line: int, character: int, invoked: bool = False) -> types.InlineCompletionParams:
    """A keystroke's request (automatic), or one asked by hand (`invoked`)."""
    kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    return types.InlineCompletionParams(
        context=types.InlineCompletionContext(trigger_kind=kind),
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(line, character))


async def _type(client, uri: str, job: Replay, passage: Passage, outcome: Outcome) -> None:
    pending: list[tuple[str, asyncio.Future, Keystroke]] = []
    line, character = end_position(passage.before)
    keys = schedule(passage.typed, job.cps, job.pause_ms)
    for i, key in enumerate(keys):
        started = time.perf_counter()
        if outcome.sent:
            outcome.sent[-1].next_at = started
        if job.cancel:
            for msg_id, future, sent in pending:
                if not future.done():
                    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
                    sent.cancelled = True
        position = types.Position(line, character)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=i + 2),
            [types.TextDocumentContentChangePartial(range=types.Range(position, position), text=key.char)]))
        line, character = (line + 1, 0) if key.char == "\n" else (line, character + utf16_units(key.char))
        sent = Keystroke(started, passage.typed[i + 1:] + passage.after, index=i, pause=key.pause)
        msg_id = str(uuid.uuid4())
        future = client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, line, character), msg_id=msg_id)
        future.add_done_callback(lambda f, s=sent: _answered(f, s))
        pending.append((msg_id, future, sent))
        outcome.sent.append(sent)
        await asyncio.sleep(max(0.0, key.gap_s - (time.perf_counter() - started)))
    if keys and keys[-1].pause:
        outcome.sent[-1].next_at = outcome.sent[-1].at + keys[-1].gap_s
    futures = [f for _, f, _ in pending]
    await asyncio.wait(futures, timeout=job.timeout_s)


def _answered(future: asyncio.Future, sent: Keystroke) -> None:
    sent.answered_at = time.perf_counter()
    if future.cancelled() or future.exception() is not None:
        sent.answered_at = None
        return
    result = future.result()
    items = result.items if isinstance(result, types.InlineCompletionList) else (result or [])
    if items:
        text = items[0].insert_text
        sent.text = text if isinstance(text, str) else text.value


def end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines) - 1, utf16_units(lines[-1])


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def specd_command(config: Path | None = None) -> list[str]:
    """`specd [--config FILE] lsp` from this environment (the script beside this Python), else PATH."""
    script = Path(sys.executable).with_name("specd")
    return [str(script) if script.exists() else "specd"] + (["--config", str(config)] if config else []) + ["lsp"]
