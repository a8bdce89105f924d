"""`specd replay`: play an editor against `specd lsp` and measure what a person at the keyboard feels.

It starts `specd lsp` as a subprocess (which starts the daemon), opens FILE cut at the cursor (the
text after the cursor stays as the suffix, minus the N characters to type), then types the real
next N characters at `cps` keys a second. After each key it sends didChange and an inline
completion request, and cancels the previous request if it is still pending, as VS Code does.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from specd.daemon.cursor import PositionError, cut_at
from specd.daemon.figures import percentile


@dataclass
class Sent:
    at: float                     # when the keystroke's didChange was sent
    truth: str                    # the real text that followed the cursor at that moment
    answered_at: float | None = None
    text: str = ""
    cancelled: bool = False


@dataclass(frozen=True)
class Replay:
    file: Path                    # its uri and language; its text is cut in three:
    before: str                   # the text before the cursor
    typed: str                    # what is typed, one key at a time
    after: str                    # what follows it
    cps: float = 10.0
    reuse: bool = True
    cancel: bool = True
    timeout_s: float = 300.0

    @classmethod
    def of(cls, file: Path, text: str, at: str, chars: int, **options) -> Replay:
        """Type the `chars` characters that follow LINE:COL `at` in `text`."""
        before, rest = cut_at(text, at)
        if chars > len(rest):
            raise PositionError(f"only {len(rest)} characters follow {at}")
        return cls(file, before, rest[:chars], rest[chars:], **options)


@dataclass
class Outcome:
    uri: str
    started: float                # unix time of the first keystroke
    ended: float = 0.0            # unix time once typing is over and answered
    sent: list[Sent] = field(default_factory=list)
    model_ms: dict[str, float] = field(default_factory=dict)  # per daemon outcome, from its trace

    def report(self) -> dict:
        answered = [s for s in self.sent if s.answered_at is not None and s.text.strip()]
        latencies = [(s.answered_at - s.at) * 1e3 for s in answered]
        matched = [s for s in answered if _first_line_matches(s.text, s.truth)]
        return {
            "sent": len(self.sent), "answered": len(answered),
            "answered_share": round(len(answered) / len(self.sent), 3) if self.sent else None,
            "p50_ms": round(percentile(latencies, 50), 1) if latencies else None,
            "p95_ms": round(percentile(latencies, 95), 1) if latencies else None,
            "match_rate": round(len(matched) / len(answered), 3) if answered else None,
            "cancelled_by_client": sum(s.cancelled for s in self.sent),
            "model_s_cancelled": round(self.model_ms.get("cancelled", 0.0) / 1e3, 2),
            "model_s_done": round(self.model_ms.get("done", 0.0) / 1e3, 2),
        }


def _first_line_matches(suggestion: str, truth: str) -> bool:
    """The real text that followed begins with the suggestion's first line."""
    first = suggestion.split("\n", 1)[0].rstrip()
    return bool(first.strip()) and truth.split("\n", 1)[0].startswith(first)


async def replay(job: Replay, command: list[str], env: dict | None = None) -> Outcome:
    """Type as `job` says into the server that `command` starts. What the daemon spent on the
    requests (`Outcome.model_ms`) is for the caller to add from its trace: it is not the editor's."""
    client = LanguageClient("specd-replay", "0.1")
    await client.start_io(*command, env=env)
    uri = job.file.resolve().as_uri()
    try:
        await client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            initialization_options={"reuse": job.reuse, "cancel": job.cancel}))
        client.initialized(types.InitializedParams())
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
            uri=uri, language_id=_language(job.file), version=1, text=job.before + job.after)))
        outcome = Outcome(uri, started=time.time())
        await _type(client, uri, job, outcome)
        await asyncio.sleep(0.5)  # the daemon's requests for it are answered by then
        outcome.ended = time.time()
        await asyncio.wait_for(client.shutdown_async(None), 30)
        client.exit(None)
    finally:
        await client.stop()
    return outcome


async def _type(client, uri: str, job: Replay, outcome: Outcome) -> None:
    pending: list[tuple[str, asyncio.Future, Sent]] = []
    line, character = _end_position(job.before)
    for i, char in enumerate(job.typed):
        started = time.perf_counter()
        if job.cancel:
            for msg_id, future, sent in pending:
                if not future.done():
                    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
                    sent.cancelled = True
        position = types.Position(line, character)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=i + 2),
            [types.TextDocumentContentChangePartial(range=types.Range(position, position), text=char)]))
        line, character = (line + 1, 0) if char == "\n" else (line, character + _utf16_units(char))
        sent = Sent(started, job.typed[i + 1:] + job.after)
        msg_id = str(uuid.uuid4())
        future = client.protocol.send_request_async(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionParams(
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
            text_document=types.TextDocumentIdentifier(uri), position=types.Position(line, character)), msg_id=msg_id)
        future.add_done_callback(lambda f, s=sent: _answered(f, s))
        pending.append((msg_id, future, sent))
        outcome.sent.append(sent)
        await asyncio.sleep(max(0.0, 1.0 / job.cps - (time.perf_counter() - started)))
    futures = [f for _, f, _ in pending]
    await asyncio.wait(futures, timeout=job.timeout_s)


def _answered(future: asyncio.Future, sent: Sent) -> None:
    sent.answered_at = time.perf_counter()
    if future.cancelled() or future.exception() is not None:
        sent.answered_at = None
        return
    result = future.result()
    items = result.items if isinstance(result, types.InlineCompletionList) else (result or [])
    if items:
        text = items[0].insert_text
        sent.text = text if isinstance(text, str) else text.value


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines) - 1, _utf16_units(lines[-1])


def _utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _language(path: Path) -> str:
    return {".py": "python", ".js": "javascript", ".ts": "typescript", ".go": "go", ".rs": "rust",
            ".c": "c", ".cpp": "cpp", ".java": "java", ".lua": "lua"}.get(path.suffix, "plaintext")


def specd_command(config: Path | None = None) -> list[str]:
    """`specd [--config FILE] lsp` from this environment (the script beside this Python), else PATH."""
    script = Path(sys.executable).with_name("specd")
    return [str(script) if script.exists() else "specd"] + (["--config", str(config)] if config else []) + ["lsp"]
