"""`specd replay`: play an editor against `specd lsp` and measure what a person at the keyboard feels.

It starts `specd lsp` as a subprocess (which starts the daemon), opens FILE cut at the cursor (the
text after the cursor stays as the suffix, minus the N characters to type), then types the real
next N characters at `cps` keys a second. After each key it sends didChange and an inline
completion request, and cancels the previous request if it is still pending, as VS Code does.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient


@dataclass
class Sent:
    at: float                     # when the keystroke's didChange was sent
    truth: str                    # the real text that followed the cursor at that moment
    answered_at: float | None = None
    text: str = ""
    cancelled: bool = False


@dataclass(frozen=True)
class Replay:
    file: Path
    line: int                     # 1-based
    column: int                   # 1-based
    chars: int
    cps: float = 10.0
    reuse: bool = True
    cancel: bool = True
    timeout_s: float = 300.0


@dataclass
class Outcome:
    sent: list[Sent] = field(default_factory=list)
    model_ms: dict[str, float] = field(default_factory=dict)  # per daemon outcome, from its trace

    def report(self) -> dict:
        answered = [s for s in self.sent if s.answered_at is not None and s.text.strip()]
        latencies = sorted((s.answered_at - s.at) * 1e3 for s in answered)
        matched = [s for s in answered if _first_line_matches(s.text, s.truth)]
        return {
            "sent": len(self.sent), "answered": len(answered),
            "answered_share": round(len(answered) / len(self.sent), 3) if self.sent else None,
            "p50_ms": round(_percentile(latencies, 50), 1) if latencies else None,
            "p95_ms": round(_percentile(latencies, 95), 1) if latencies else None,
            "match_rate": round(len(matched) / len(answered), 3) if answered else None,
            "cancelled_by_client": sum(s.cancelled for s in self.sent),
            "model_s_cancelled": round(self.model_ms.get("cancelled", 0.0) / 1e3, 2),
            "model_s_done": round(self.model_ms.get("done", 0.0) / 1e3, 2),
        }


def model_time(trace: Path, since: float, document: str) -> dict[str, float]:
    """Model time (ms) the daemon spent on `document`'s requests received after `since` (unix
    time), per outcome: what cancelled requests cost is what typing made the model throw away."""
    from specd.daemon.tracing import read_trace

    out: dict[str, float] = {}
    for r in read_trace(trace):
        if r.document == document and r.received_at >= since:
            busy = r.tokenize_ms + r.prefill_ms + r.draft_ms + r.verify_ms + r.other_ms
            out[r.outcome] = out.get(r.outcome, 0.0) + busy
    return out


def _first_line_matches(suggestion: str, truth: str) -> bool:
    """The real text that followed begins with the suggestion's first line."""
    first = suggestion.split("\n", 1)[0].rstrip()
    return bool(first.strip()) and truth.split("\n", 1)[0].startswith(first)


def _percentile(sorted_values: list[float], q: float) -> float:
    if len(sorted_values) == 1:
        return sorted_values[0]
    return statistics.quantiles(sorted_values, n=100, method="inclusive")[int(q) - 1]


def cut(text: str, line: int, column: int, chars: int) -> tuple[str, str, str]:
    """(before the cursor, the characters to type, after them) for a 1-based LINE:COL."""
    lines = text.splitlines(keepends=True)
    if not 1 <= line <= len(lines) or column < 1 or column - 1 > len(lines[line - 1].rstrip("\n")):
        raise ValueError(f"{line}:{column} is outside the file")
    offset = sum(map(len, lines[: line - 1])) + column - 1
    if offset + chars > len(text):
        raise ValueError(f"only {len(text) - offset} characters follow {line}:{column}")
    return text[:offset], text[offset:offset + chars], text[offset + chars:]


async def replay(job: Replay, command: list[str], trace: Path, env: dict | None = None) -> Outcome:
    before, typed, after = cut(job.file.read_text(), job.line, job.column, job.chars)
    client = LanguageClient("specd-replay", "0.1")
    await client.start_io(*command, env=env)
    outcome = Outcome()
    try:
        await client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            initialization_options={"reuse": job.reuse, "cancel": job.cancel}))
        client.initialized(types.InitializedParams())
        uri = job.file.resolve().as_uri()
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
            uri=uri, language_id=_language(job.file), version=1, text=before + after)))
        started = time.time()
        await _type(client, uri, job, before, typed, after, outcome)
        await asyncio.sleep(0.5)  # the daemon writes a trace line just after each reply
        outcome.model_ms = model_time(trace, started, uri)
        await asyncio.wait_for(client.shutdown_async(None), 30)
        client.exit(None)
    finally:
        await client.stop()
    return outcome


async def _type(client, uri: str, job: Replay, before: str, typed: str, after: str, outcome: Outcome) -> None:
    pending: list[tuple[str, asyncio.Future, Sent]] = []
    line, character = _end_position(before)
    for i, char in enumerate(typed):
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
        sent = Sent(started, typed[i + 1:] + after)
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
