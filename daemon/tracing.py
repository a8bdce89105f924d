"""Latency tracing: one JSON line per completion request, saying where its time went.

The phases of a request, in order, add up to its total (received -> reply written):

    queue     waiting for the model worker (or, if dropped from the queue, until then)
    tokenize  building the prompt
    prefill   the prompt's KV (`reused_tokens` came from the cache, `prefilled_tokens` computed)
    draft     proposing, summed over the steps (each step is listed with its own times); of it,
              `draft_prefill_ms` is the draft model reading the prompt on its first proposal
    verify    the target's passes over the proposals, summed likewise
    other     the rest of the worker's time: committing tokens, stop checks, cache bookkeeping
    reply     from the worker's end to the reply being written

`other` is what the worker's wall time leaves after the engine's own phases, so a negative one
would mean phases overlap or are counted twice. The file is rotated past half the size cap, keeping
one predecessor (`trace.jsonl.1`), so the two stay under `daemon.trace_max_mb` together. The
engine's phases and token counts are its `Stats` record, nested whole as `stats`.

Beside them, one line per report of what the user did with a suggestion (`UptakeRecord`, its
`kind` "uptake"): `specd trace` joins each to the request whose answer was shown, by connection
and request id.

A trace that cannot be written (a full disk, a file made unwritable) costs the trace, never a
request: one warning in the log when writing starts failing, one line when it works again.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from typing import Literal

import msgspec

from specd.daemon.paths import private_file, rotate
from specd.decoding.stats import Stats

log = logging.getLogger("specd.tracing")
PHASES = ("queue", "tokenize", "prefill", "draft", "verify", "other", "reply")


ENGINE_PHASES = ("tokenize", "prefill", "draft", "verify")  # timed by the engine: in `stats`


class TraceRecord(msgspec.Struct, frozen=True):
    """One request. What the engine measured is `stats`, its own record as it filled it (steps
    included); the rest is what only the daemon knows: who asked, the outcome, its own phases."""
    id: int
    client: int
    document: str
    language: str
    drafter: str
    received_at: float                    # unix time
    outcome: Literal["done", "cancelled", "error"]
    cause: str | None                     # why it was cancelled: superseded, preempted, cancel, disconnect, shutdown
    error: str | None                     # the error reply's message
    stop_reason: str | None
    queue_ms: float
    other_ms: float
    reply_ms: float
    total_ms: float                       # time to result (stats.total_ms is the engine's part)
    passes: int                           # forward passes of either model for this request
    passes_after_cancel: int | None       # of those, how many began after the cancel was asked
    stats: Stats                          # an error: empty (no engine phases, all "other")
    prefetch: bool = False                # computed ahead for the suggestion cache, no one waiting

    def phase_ms(self, phase: str) -> float:
        return getattr(self.stats if phase in ENGINE_PHASES else self, f"{phase}_ms")


class UptakeRecord(msgspec.Struct, frozen=True, tag="uptake", tag_field="kind"):
    """A language server's report on a suggestion it showed (protocol.Feedback), as the daemon got it."""
    at: float                             # unix time
    client: int                           # the connection, as TraceRecord.client
    request: int | None                   # the request whose answer was shown, on that connection
    event: Literal["shown", "partial", "accepted", "dismissed"]
    chars: int
    first: bool
    language: str
    how: str = ""                         # of a dismissed one: "typed over" or "escaped"


class TraceWriter:
    def __init__(self, path: Path, max_bytes: int):
        self.path, self.max_bytes = path, max_bytes
        self._encoder = msgspec.json.Encoder()
        self.failing: OSError | None = None   # the error of the last write, while writes fail
        self._torn = False                    # a short write left a line without its newline

    def write(self, line: TraceRecord | UptakeRecord) -> None:
        """Append one line; an OSError is logged once (until a write works again), never raised."""
        data = self._encoder.encode(line) + b"\n"
        try:
            self._append(b"\n" + data if self._torn else data)
        except OSError as error:
            if self.failing is None:
                log.warning("cannot write the trace %s: %s; requests are served without it "
                            "(said once, until it works again)", self.path, error.strerror or error)
            self.failing = error
            return
        if self.failing is not None:
            log.info("the trace %s is written again", self.path)
            self.failing = None

    def _append(self, data: bytes) -> None:
        rotate(self.path, self.max_bytes // 2)
        fd = private_file(self.path)
        try:
            written = os.write(fd, data)
        finally:
            os.close(fd)
        self._torn = written < len(data)    # a full disk can take part of a line
        if self._torn:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def read_trace(path: Path) -> list[TraceRecord]:
    """The requests of the rotated file and the current one, oldest first. A torn or foreign line
    (a crash mid-write, another version, an uptake report) is skipped, not fatal."""
    return _read(path, TraceRecord)


def read_uptake(path: Path) -> list[UptakeRecord]:
    """The uptake reports of the same files, oldest first; every other line is skipped."""
    return _read(path, UptakeRecord)


def _read(path: Path, kind: type):
    decoder = msgspec.json.Decoder(kind)
    records = []
    for part in (path.with_name(path.name + ".1"), path):
        if not part.exists():
            continue
        for line in part.read_bytes().splitlines():
            try:
                records.append(decoder.decode(line))
            except msgspec.DecodeError:
                continue
    return records

