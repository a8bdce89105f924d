"""The wire protocol under fuzzing: more than 10,000 random and mutated frames a run against a real
daemon. Every frame is answered, or the connection is closed cleanly where the protocol says so;
nothing the daemon says is unreadable or an internal error; it never hangs, and it still serves a
good request afterwards.

Frames come in two kinds. Messages: the client's message types with fields that are right, wrong
or random JSON, then mutated (bytes flipped, cut, duplicated, spliced), or plain random bytes, each
sent in a correct frame, in pipelined batches. Streams: byte streams with frames and random length
headers mixed, cut anywhere, then the client half-closes, and the daemon must answer the whole
frames and close. What the daemon owes each frame is read off it with the protocol's own decoder:
one reply, none for a Cancel (a notice), and a reply then a closed connection for a Hello of
another version. Shutdown is left out (it would end the run).
"""

from __future__ import annotations

import os
import socket
import struct

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specd.daemon import protocol
from specd.decoding.registry import DRAFTERS
from tests.homes import make_home

BARRIER = 2**53   # the id of the status request that ends a batch; the strategies never draw it
FRAMES_PER_RUN = 10_000
TIMEOUT_S = 60.0  # a reply later than this is a hang


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory, tiny_target, tiny_draft):
    """A daemon whose completions are cheap whatever the fuzzer asks: at most 4 new tokens from a
    64-token prefix, so that the valid requests among the frames do not dominate the run."""
    root = tmp_path_factory.mktemp("fuzz")
    home = make_home(root, tiny_target, tiny_draft, socket=str(root / "run" / "fuzz.sock"),
                     state_dir=str(root / "state" / "specd"))
    text = home.config_path.read_text()
    for old, new in (("prefix_tokens = 2048", "prefix_tokens = 64"), ("max_tokens_limit = 256", "max_tokens_limit = 4"),
                     ("prefill_chunk = 8", "prefill_chunk = 64"), ("suffix_tokens = 64", "suffix_tokens = 16")):
        text = text.replace(old, new)
    home.config_path.write_text(text.replace("[completion]\n", "[completion]\nmax_tokens = 2\n"))
    started = home.specd("start")
    assert started.returncode == 0, started.stderr
    yield home
    home.specd("stop")


# --- the frames ---

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8)
ids = st.integers(0, 2**31) | st.integers(-5, 2**53 - 1) | json_values
texts = st.text(max_size=80) | st.sampled_from(["", "def f(x):\n    ", "\x00\uffff\U0010ffff", "é" * 50])
FIELDS = {
    # mostly the right version: another one ends the connection, and with it the batch
    "hello": {"version": st.sampled_from([protocol.VERSION] * 6) | st.integers(-2, 3) | json_values,
              "client": texts, "token": texts},
    "complete": {"document": texts, "text": texts, "cursor": st.integers(-3, 90), "prefix": texts, "suffix": texts,
                 "language": texts, "max_tokens": st.integers(-1, 6), "single_line": st.booleans(),
                 "temperature": st.floats(-1, 6), "top_p": st.floats(-0.5, 1.5), "seed": st.integers(-1, 2**64 - 1),
                 "deadline_ms": st.integers(-1, 50),
                 "drafter": st.sampled_from([*DRAFTERS, "x"]),
                 "extras": st.lists(st.fixed_dictionaries({"path": texts, "text": texts}), max_size=2),
                 "hints": st.lists(texts, max_size=2), "supersede": st.booleans(), "reuse": st.booleans(),
                 "suffix_tokens": st.integers(-1, 40)},
    "feedback": {"event": st.sampled_from(["shown", "partial", "accepted", "liked"]), "chars": st.integers(-1, 2**32),
                 "first": st.booleans(), "language": texts},
    "cancel": {}, "get_status": {}, "frobnicate": {"x": json_values},
}
KINDS = ["hello", "complete", "complete", "complete", "cancel", "feedback", "get_status", "frobnicate"]


@st.composite
def messages(draw) -> bytes:
    """One message as JSON: a known or unknown type, an id or not, each field right or random."""
    kind = draw(st.sampled_from(KINDS))
    body: dict = {"type": kind if draw(st.integers(0, 9)) else draw(json_values)}
    if kind != "hello" and draw(st.integers(0, 9)):
        body["id"] = draw(ids)
    for name, values in FIELDS[kind].items():
        if draw(st.booleans()):
            body[name] = draw(values if draw(st.integers(0, 5)) else json_values)
    if draw(st.integers(0, 19)) == 0:
        body[draw(st.text(max_size=6))] = draw(json_values)       # a field no message has
    return msgspec.json.encode(body)


@st.composite
def mutated(draw, source: st.SearchStrategy[bytes]) -> bytes:
    data = bytearray(draw(source))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["flip", "cut", "insert", "duplicate", "truncate"]))
        if op == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del data[at:at + draw(st.integers(1, 8))]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8) | st.sampled_from([b'"', b"{", b"}", b"\\u", b"\xff"]))
        elif op == "duplicate":
            data[at:at] = data[at:at + draw(st.integers(1, 16))]
        else:
            del data[at:]
    return bytes(data)


bodies = st.one_of(messages(), messages(), mutated(messages()), mutated(messages()), st.binary(max_size=64))


def owed(body: bytes) -> str:
    """What the daemon owes this frame: "reply", "none" (a Cancel or a Feedback: notices), "close"
    (a reply, then it hangs up), "skip" (a Shutdown: not sent)."""
    message = protocol.decode_request(body)
    if isinstance(message, (protocol.Cancel, protocol.Feedback)):
        return "none"
    if isinstance(message, protocol.Shutdown):
        return "skip"
    if isinstance(message, protocol.Hello) and message.version != protocol.VERSION:
        return "close"
    return "reply"


# --- a blocking client, to drive thousands of frames quickly ---

class Wire:
    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(TIMEOUT_S)
        self.sock.connect(path)
        self.buffer = b""

    def send(self, body: bytes) -> None:
        self.sock.sendall(struct.pack(">I", len(body)) + body)

    def read(self) -> protocol.Message | None:
        """The next reply, or None once the daemon has closed the connection."""
        while True:
            if len(self.buffer) >= 4:
                (size,) = struct.unpack(">I", self.buffer[:4])
                if len(self.buffer) >= 4 + size:
                    body, self.buffer = self.buffer[4:4 + size], self.buffer[4 + size:]
                    return protocol.decode_reply(body)     # raises if the daemon said something unreadable
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                assert not self.buffer, f"the daemon closed mid-frame: {self.buffer[:40]!r}"
                return None
            self.buffer += chunk

    def hello(self) -> Wire:
        self.send(protocol.pack(protocol.Hello(protocol.VERSION, "fuzz"))[4:])
        assert isinstance(self.read(), protocol.Welcome)
        return self

    def close(self) -> None:
        self.sock.close()


def checked(reply: protocol.Message | None) -> protocol.Message:
    assert reply is not None, "the daemon closed a connection it owed a reply"
    assert not (isinstance(reply, protocol.Error) and reply.code == "internal"), f"an internal error: {reply}"
    return reply


def run_batch(path: str, batch: list[bytes]) -> int:
    """Send `batch` pipelined on a fresh connection and check what comes back; returns frames sent."""
    wire = Wire(path).hello()
    try:
        sent, replies, closes = 0, 0, False
        for body in batch:
            duty = owed(body)
            if duty == "skip":
                continue
            wire.send(body)
            sent += 1
            replies += duty != "none"
            if duty == "close":
                closes = True
                break
        for _ in range(replies):
            checked(wire.read())
        if closes:
            assert wire.read() is None, "a client of another version is disconnected"
            return sent
        wire.send(protocol.pack(protocol.GetStatus(BARRIER))[4:])
        barrier = checked(wire.read())
        assert isinstance(barrier, protocol.Status) and barrier.id == BARRIER, f"a reply nobody was owed: {barrier}"
        return sent
    finally:
        wire.close()


@st.composite
def streams(draw) -> tuple[bytes, int]:
    """Frames, random length headers and junk run together, cut anywhere: (bytes, whole frames)."""
    out, frames = bytearray(), 0
    for _ in range(draw(st.integers(1, 12))):
        part = draw(st.sampled_from(["frame", "frame", "header", "junk"]))
        if part == "frame":
            body = draw(bodies)
            if owed(body) in ("skip", "close"):
                continue
            out += struct.pack(">I", len(body)) + body
            frames += 1
        elif part == "header":
            out += struct.pack(">I", draw(st.integers(0, 2**32 - 1) | st.integers(0, 200)))
        else:
            out += draw(st.binary(min_size=1, max_size=32))
    return bytes(out[:draw(st.integers(0, len(out)))]), frames


def run_stream(path: str, data: bytes) -> None:
    """Send `data`, half-close: every reply must be readable, and the daemon must close."""
    wire = Wire(path).hello()
    try:
        wire.sock.sendall(data)
        wire.sock.shutdown(socket.SHUT_WR)
        while (reply := wire.read()) is not None:
            checked(reply)
    finally:
        wire.close()


def test_ten_thousand_fuzzed_frames_are_each_answered_and_the_daemon_lives(fuzzed):
    path = str(fuzzed.paths().socket)
    count = {"frames": 0, "streams": 0, "stream_frames": 0}
    fuzz = settings(deadline=None, database=None, print_blob=True, suppress_health_check=list(HealthCheck))

    @settings(fuzz, max_examples=int(os.environ.get("SPECD_FUZZ_BATCHES", 330)))
    @given(st.lists(bodies, min_size=30, max_size=40))
    def batches(batch):
        count["frames"] += run_batch(path, batch)

    @settings(fuzz, max_examples=int(os.environ.get("SPECD_FUZZ_STREAMS", 300)))
    @given(streams())
    def cut_streams(stream):
        data, frames = stream
        run_stream(path, data)
        count["streams"] += 1
        count["stream_frames"] += frames

    batches()
    cut_streams()
    print(f"\nfuzzed the daemon's protocol: {count}")
    assert count["frames"] + count["stream_frames"] >= FRAMES_PER_RUN, count

    good = Wire(path).hello()
    good.send(protocol.pack(protocol.Complete(id=1, document="file:///after-fuzz.py", prefix="def f(x):\n    "))[4:])
    reply = good.read()
    assert isinstance(reply, protocol.CompletionReply) and reply.outcome == "done", reply
    good.close()
    log = fuzzed.paths().log.read_text()
    assert "Traceback" not in log, log[log.index("Traceback") - 2000:][:6000]
