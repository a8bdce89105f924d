"""The daemon's wire protocol: a tagged union of msgspec Structs, as JSON, in length-prefixed frames.

A frame is a 4-byte big-endian length, then that many bytes of one JSON message whose `type`
field names it. A connection starts with Hello -> Welcome (the version handshake; over TCP, Hello
carries the token). After that a client sends requests, each with an id it chooses (unique among
its requests in flight), and gets exactly one reply per request with the same id: Complete ->
CompletionReply (outcome "done" or "cancelled") or Error; GetStatus -> Status; Shutdown ->
ShuttingDown. Cancel is a notice, not a request: the request it names gets its one reply; so is
Feedback (what the user did with a suggestion shown), which only counts.

A frame over the size cap, bytes that are not JSON, or a message that does not fit these types is
answered with an Error (with the request id when it can be read) and the connection lives on.
This module needs neither torch nor the engine (decoding's registry, stats and curve are torch-free), so
that clients import it cheaply.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Annotated, Literal

import msgspec

from specd.decoding.curve import CostCurve
from specd.decoding.registry import DrafterName
from specd.decoding.stats import Stats

VERSION = 7                           # 2: a reply carries the engine's Stats whole; 3: prefetch, kept answers;
                                      # 4: Status.curve; 5: Feedback, Status.uptake; 6: Feedback.request;
                                      # 7: Feedback "dismissed" and `how`
HEADER = struct.Struct(">I")          # the length of the JSON body that follows
DISCARD_CHUNK = 1 << 16               # an oversized body is read and dropped in pieces this big

Id = Annotated[int, msgspec.Meta(ge=0, le=2**53)]
Outcome = Literal["done", "cancelled"]


class Message(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="type"):
    """Every message on the wire."""


# --- the handshake ---

class Hello(Message, tag="hello"):
    version: int
    client: str = ""                  # who is asking, for the log: "specd-lsp 0.1", "specd complete"
    token: str = ""                   # required over TCP: the contents of the token file


class Welcome(Message, tag="welcome"):
    version: int
    pid: int
    max_frame_bytes: int


# --- requests from a client ---

class Extra(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Another open file: prompt context (within its budget) and a source of lookup drafts."""
    path: str
    text: str


class Complete(Message, tag="complete"):
    """Complete `document` at a cursor: `text` and `cursor` (a character offset into it), or
    `prefix` and `suffix`. Unset options take the config's [completion] values."""
    id: Id
    document: str                                      # an identifier, usually the file's uri
    text: str | None = None
    cursor: Annotated[int, msgspec.Meta(ge=0)] | None = None
    prefix: str | None = None
    suffix: str | None = None
    language: str = ""
    max_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    single_line: bool = False
    temperature: Annotated[float, msgspec.Meta(ge=0.0, le=5.0)] | None = None
    top_p: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)] | None = None
    seed: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)] = 0
    deadline_ms: Annotated[int, msgspec.Meta(ge=0)] | None = None  # 0: none; default completion.first_line_ms
    cut_ms: Annotated[int, msgspec.Meta(ge=0)] | None = None       # 0: none; default completion.cut_ms
    drafter: DrafterName | None = None
    extras: list[Extra] = []
    hints: list[str] = []             # likely continuations: lookup sources only, always verified
    supersede: bool = True            # False: do not cancel older requests for this document
    reuse: bool = True                # False: start from a cold cache (for side-by-side comparisons)
    suffix_tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None  # this request's suffix budget
    prefetch: bool = False            # computed ahead for the suggestion cache (the accept branch of
                                      # one just shown): run only when idle, preempted by any other

    def split(self) -> tuple[str, str]:
        """(prefix, suffix); ValueError says what is wrong with the cursor fields."""
        if self.prefix is not None:
            if self.text is not None or self.cursor is not None:
                raise ValueError("give text and cursor, or prefix and suffix, not both")
            return self.prefix, self.suffix or ""
        if self.text is None or self.cursor is None or self.suffix is not None:
            raise ValueError("a complete request needs text and cursor, or prefix (and suffix)")
        if self.cursor > len(self.text):
            raise ValueError(f"cursor {self.cursor} is past the end of the text ({len(self.text)} characters)")
        return self.text[: self.cursor], self.text[self.cursor:]


class Cancel(Message, tag="cancel"):
    id: Id                            # the request to cancel; it gets its "cancelled" reply


Chars = Annotated[int, msgspec.Meta(ge=0, le=2**31)]
Language = Annotated[str, msgspec.Meta(max_length=64)]


class Feedback(Message, tag="feedback"):
    """What the user did with a suggestion an editor showed, as the language server saw it (a
    notice: no reply). "shown": sent to the editor, `chars` long; "partial": `chars` more of it
    taken (a word, a line); "accepted": taken whole, `chars` the characters not already counted by
    its parts; "dismissed": left with `chars` of it not taken, `how` says whether the user typed
    something else ("typed over") or the editor hid it on request ("escaped"); `first`: nothing of
    that suggestion was taken before. `language`: the document's
    languageId ("" where the editor gave none). `request`: the id of the Complete, on this
    connection, whose answer the suggestion shows (None where it came from elsewhere): the trace
    joins the two, so `specd trace` says which requests' answers were taken."""
    event: Literal["shown", "partial", "accepted", "dismissed"]
    chars: Chars
    first: bool = True
    language: Language = ""
    request: Id | None = None
    how: Literal["", "typed over", "escaped"] = ""


class GetStatus(Message, tag="get_status"):
    id: Id


class Shutdown(Message, tag="shutdown"):
    id: Id


# --- replies from the daemon ---

class CompletionReply(Message, tag="completion"):
    id: Id
    text: str
    outcome: Outcome
    stop_reason: str | None = None
    queue_ms: float = 0.0             # waiting for the model worker
    stats: Stats = msgspec.field(default_factory=Stats)  # the engine's own record, as it filled it


class Error(Message, tag="error"):
    id: Id | None                     # None where the request's id could not be read
    code: str                         # malformed, invalid, unknown_type, frame_too_large, ...
    message: str


class Active(msgspec.Struct, frozen=True):
    id: int
    document: str
    state: Literal["queued", "running"]
    passes: int = 0                   # forward passes run for it so far


class Uptake(msgspec.Struct, frozen=True):
    """How many suggestions the editors showed and how many the user took (lsp/uptake.py): what
    users judge a completion tool by."""
    shown: int = 0
    accepted: int = 0                 # taken whole (Tab)
    partial: int = 0                  # taken in part (a word or a line), whether or not the rest followed
    taken: int = 0                    # of which anything was taken, whole or in part
    chars_shown: int = 0
    chars_taken: int = 0              # of whole and partial accepts
    dismissed: int = 0                # left without being taken whole: typed over or escaped
    escaped: int = 0                  # of which the editor hid it on request (Escape)

    def counted(self, event: Feedback) -> Uptake:
        """These totals with `event` added."""
        n = event.chars
        match event.event:
            case "shown":
                return msgspec.structs.replace(self, shown=self.shown + 1, chars_shown=self.chars_shown + n)
            case "partial":
                return msgspec.structs.replace(self, partial=self.partial + event.first,
                                               taken=self.taken + event.first, chars_taken=self.chars_taken + n)
            case "accepted":
                return msgspec.structs.replace(self, accepted=self.accepted + 1, taken=self.taken + event.first,
                                               chars_taken=self.chars_taken + n)
            case "dismissed":
                return msgspec.structs.replace(self, dismissed=self.dismissed + 1,
                                               escaped=self.escaped + (event.how == "escaped"))

    def __add__(self, other: Uptake) -> Uptake:
        return Uptake(*(a + b for a, b in zip(msgspec.structs.astuple(self), msgspec.structs.astuple(other))))

    def rate(self) -> str:
        """Suggestions taken whole or in part, of those shown: "42%" ("-" before any was shown)."""
        return f"{self.taken / self.shown:.0%}" if self.shown else "-"

    def summary(self) -> str:
        if not self.shown:
            return "none shown"
        chars = f"{self.chars_taken / self.chars_shown:.0%}" if self.chars_shown else "-"
        return (f"{self.shown} shown, {self.taken} taken ({self.rate()}): {self.accepted} whole, "
                f"{self.partial} in part; {self.chars_taken} of {self.chars_shown} characters ({chars})"
                + (f"; {self.dismissed} dismissed ({self.escaped} escaped)" if self.dismissed else ""))


class Status(Message, tag="status"):
    id: Id
    pid: int
    version: str
    uptime_s: float
    target: str
    draft: str
    device: str
    dtype: str
    socket: str
    tcp_port: int
    rss_mb: float
    cache_mb: float                   # KV caches held for documents
    cache_documents: int
    served: int                       # completions answered "done"
    cancelled: int
    errors: int
    reuse: float | None               # share of prompt tokens served from the cache
    acceptance: dict[str, float]      # accepted / proposed per drafter
    p50_ms: float | None              # time to result of "done" requests
    p95_ms: float | None
    forward_passes: int
    active: list[Active] = []
    from_cache: int = 0               # of served, answered from the suggestion cache
    prefetched: int = 0               # prefetches computed (not in served or the percentiles)
    device_reason: str = ""           # why this device ("auto: NVIDIA H200 (torch 2.13.0+cu128)")
    curve: CostCurve | None = None    # ms per pass by width on this machine (decoding/curve.py)
    uptake: Uptake = Uptake()         # suggestions shown and taken since start, as the editors reported them
    uptake_hour: Uptake = Uptake()    # the same, over the last hour
    uptake_languages: dict[str, Uptake] = {}   # since start, by the documents' languageId


class ShuttingDown(Message, tag="shutting_down"):
    id: Id
    cancelled: int                    # requests it cancelled on the way out


ClientMessage = Hello | Complete | Cancel | Feedback | GetStatus | Shutdown
ServerMessage = Welcome | CompletionReply | Error | Status | ShuttingDown
CLIENT_TYPES = frozenset(t.__struct_config__.tag for t in ClientMessage.__args__)


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("specd")
    except PackageNotFoundError:
        return "unknown"


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int):
        super().__init__(f"a frame of {size} bytes is over the limit of {limit}")
        self.size, self.limit = size, limit


_encoder = msgspec.json.Encoder()
_client_decoder = msgspec.json.Decoder(ClientMessage)
_server_decoder = msgspec.json.Decoder(ServerMessage)


class _Envelope(msgspec.Struct):
    """What can be read of a message that does not validate: its type and id, if any."""
    type: str | None = None
    id: int | None = None


_envelope_decoder = msgspec.json.Decoder(_Envelope)


def pack(message: Message) -> bytes:
    body = _encoder.encode(message)
    return HEADER.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader, limit: int) -> bytes:
    """One frame's body. Over `limit`, the body is read and dropped (so the stream stays in step)
    and FrameTooLarge raised. EOF raises asyncio.IncompleteReadError."""
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    if size > limit:
        left = size
        while left:
            left -= len(await reader.readexactly(min(left, DISCARD_CHUNK)))
        raise FrameTooLarge(size, limit)
    return await reader.readexactly(size)


def decode_request(body: bytes) -> ClientMessage | Error:
    """A client's message, or the Error that answers it (with its id where that can be read)."""
    try:
        return _client_decoder.decode(body)
    except UnicodeDecodeError as error:
        readable = body.decode("utf-8", "replace").encode()
        return Error(_peek(readable).id, "malformed", f"the frame is not valid UTF-8 ({error.reason})")
    except msgspec.ValidationError as error:
        envelope = _peek(body)
        if envelope.type is not None and envelope.type not in CLIENT_TYPES:
            return Error(envelope.id, "unknown_type", f"unknown message type {envelope.type!r}; "
                         f"known: {', '.join(sorted(CLIENT_TYPES))}")
        return Error(envelope.id, "invalid", str(error))
    except msgspec.DecodeError as error:
        return Error(None, "malformed", str(error))


def _peek(body: bytes) -> _Envelope:
    """The type and id, where they can be read; an id no reply could carry (-1, 2**60) is None."""
    try:
        envelope = _envelope_decoder.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return _Envelope()
    if envelope.id is not None and not 0 <= envelope.id <= 2**53:
        return _Envelope(envelope.type)
    return envelope


def decode_reply(body: bytes) -> ServerMessage:
    """A daemon's message; msgspec.DecodeError where it is not one (a daemon of another version)."""
    return _server_decoder.decode(body)
