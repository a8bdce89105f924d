"""`specd lsp` under fuzzing: thousands of random and mutated JSON-RPC messages a run, over its
stdio, with a real daemon behind it. Every request gets exactly one response and none is an
internal error; notifications get none; the server lives, and answers a good request afterwards.

Messages are LSP's own (documents opened, changed and closed, inline and plain completion,
cancels) with parameters that are right, wrong or random JSON, positions anywhere, texts with
odd characters and lone surrogates; unknown methods; notifications sent with an id; then the
bytes mutated, or random bytes. Each is sent with a correct Content-Length, in pipelined batches.
What a message is owed is read off it: a response when it is a JSON object with a method and an
id (a number or a string), JSON-RPC 2.0 or not. Every request has an id of its own, since LSP ids are unique.
`shutdown` and `exit` are left out (they end the run).
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specd.bench.replay import specd_command
from tests.homes import make_home

MESSAGES_PER_RUN = 3_000
TIMEOUT_S = 60.0
INTERNAL_ERROR = -32603
ENDS_THE_RUN = {"shutdown", "exit"}


class LspProcess:
    """`specd lsp` over pipes, written and read by hand; a thread collects its responses."""

    def __init__(self, env: dict):
        self.process = subprocess.Popen(specd_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env={**os.environ, **env})
        self.responses: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ids = itertools.count(1)

    def _read(self) -> None:
        out = self.process.stdout
        while True:
            length = None
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line or length is None:
                self.responses.put(None)
                return
            message = json.loads(out.read(length))
            if "method" not in message:          # a response (the server's own notices are skipped)
                self.responses.put(message)

    def write(self, body: bytes) -> None:
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def request(self, method: str, params) -> dict:
        """Send one request and wait for its response (nothing else may be in flight)."""
        msg_id = next(self.ids)
        self.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode())
        response = self.responses.get(timeout=TIMEOUT_S)
        assert response is not None and response.get("id") == msg_id, response
        return response


@pytest.fixture(scope="module")
def server(tmp_path_factory, tiny_target, tiny_draft):
    home = make_home(tmp_path_factory.mktemp("lspfuzz"), tiny_target, tiny_draft)
    home.config_path.write_text(home.config_path.read_text().replace("prefill_chunk = 8", "prefill_chunk = 64")
                                # cheap completions, long enough to show something past a healed indent (the
                                # tiny model spells it again a space a token)
                                .replace("[completion]\n", "[completion]\nmax_tokens = 8\n"))
    lsp = LspProcess(home.env)
    lsp.request("initialize", {"processId": None, "capabilities": {}, "rootUri": None})
    lsp.write(json.dumps({"jsonrpc": "2.0", "method": "initialized", "params": {}}).encode())
    yield lsp
    lsp.process.kill()
    lsp.process.wait()
    home.specd("stop")


# --- the messages ---

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6)
URIS = ["file:///fuzz/a.py", "file:///fuzz/b.js", "file:///fuzz/with%20space.py", "file:///fuzz/%C3%A9t%C3%A9.py",
        "untitled:Untitled-1", "file:///fuzz/never-opened.py", "", "not a uri"]
uris = st.sampled_from(URIS) | st.text(max_size=10)
texts = st.text(max_size=120) | st.sampled_from(["", "def f(x):\n    ", "\r\n\r\n", "\t" * 30, "😀é\u200b", "\x00"])
positions = st.fixed_dictionaries({"line": st.integers(-2, 12) | st.integers(0, 2**31),
                                   "character": st.integers(-2, 60)})
ranges = st.fixed_dictionaries({"start": positions, "end": positions})
changes = st.lists(st.fixed_dictionaries({"text": texts}, optional={"range": ranges}), max_size=3)
document = st.fixed_dictionaries({"uri": uris})
PARAMS = {
    "textDocument/didOpen": st.fixed_dictionaries({"textDocument": st.fixed_dictionaries({
        "uri": uris, "languageId": st.sampled_from(["python", "javascript", ""]), "version": st.integers(-1, 9),
        "text": texts})}),
    "textDocument/didChange": st.fixed_dictionaries({
        "textDocument": st.fixed_dictionaries({"uri": uris, "version": st.integers(0, 99)}),
        "contentChanges": changes}),
    "textDocument/didClose": st.fixed_dictionaries({"textDocument": document}),
    "textDocument/inlineCompletion": st.fixed_dictionaries({
        "textDocument": document, "position": positions,
        "context": st.fixed_dictionaries({"triggerKind": st.integers(0, 3)})}),
    "textDocument/completion": st.fixed_dictionaries({"textDocument": document, "position": positions}),
    "$/cancelRequest": st.fixed_dictionaries({"id": st.integers(0, 50) | st.text(max_size=4)}),
    "textDocument/hover": st.fixed_dictionaries({"textDocument": document, "position": positions}),
    "workspace/executeCommand": st.fixed_dictionaries({"command": st.text(max_size=8)}),
    "no/such/method": json_values,
}
NOTIFICATIONS = {"textDocument/didOpen", "textDocument/didChange", "textDocument/didClose", "$/cancelRequest"}


@st.composite
def messages(draw) -> dict:
    method = draw(st.sampled_from(sorted(PARAMS)))
    message: dict = {"jsonrpc": "2.0", "method": method}
    if draw(st.integers(0, 9)):
        message["params"] = draw(PARAMS[method] if draw(st.integers(0, 5)) else json_values)
    if method not in NOTIFICATIONS or draw(st.integers(0, 9)) == 0:   # a notification with an id, now and then
        message["id"] = 0   # replaced by a fresh one as it is sent
    return message


@st.composite
def bodies(draw) -> bytes | dict:
    """A message (to be given its own id), or bytes: a message's JSON mutated, or random bytes."""
    kind = draw(st.sampled_from(["message"] * 4 + ["mutated", "bytes", "surrogate"]))
    if kind == "message":
        return draw(messages())
    if kind == "bytes":
        return draw(st.binary(max_size=60))
    data = bytearray(json.dumps({**draw(messages()), "id": 10**9 + draw(st.integers(0, 10**6))}).encode())
    if kind == "surrogate":   # a lone surrogate, which JSON can carry and UTF-8 cannot
        at = data.find(b'"text": "')
        if at >= 0:
            data[at + 9:at + 9] = b"\\ud800"
        return bytes(data)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["flip", "cut", "insert"]))
        if op == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del data[at:at + draw(st.integers(1, 6))]
        else:
            data[at:at] = draw(st.sampled_from([b'"', b"{", b"}", b"]", b"\\u", b"\xff", b"null", b"-1"]))
    return bytes(data)


def plain_id(msg_id) -> bool:
    """An id as LSP has them: a number or a string. (Others, which mutations make, pygls answers
    or not as it will; such answers are left out of the count.)"""
    return isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool)


def owed_id(body: bytes):
    """The id a response is owed to, or None (a notification, or not a readable request)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    msg_id = message.get("id")
    return msg_id if plain_id(msg_id) else None


def run_batch(server: LspProcess, batch: list) -> int:
    owed: dict = {}
    sent = 0
    for item in batch:
        if isinstance(item, dict):
            if "id" in item:
                item = {**item, "id": next(server.ids) if len(owed) % 5 else f"s{next(server.ids)}"}
            body = json.dumps(item).encode()
        else:
            body = item
        try:
            method = json.loads(body).get("method")
        except (ValueError, AttributeError):
            method = None
        if method in ENDS_THE_RUN:
            continue
        if (msg_id := owed_id(body)) is not None:
            if msg_id in owed:
                continue              # a mutation made a duplicate id: LSP ids are unique
            owed[msg_id] = body
        server.write(body)
        sent += 1
    while owed:
        try:
            response = server.responses.get(timeout=TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"no response within {TIMEOUT_S:.0f} s to {list(owed.values())[:3]}") from None
        assert response is not None, "the language server died"
        if not plain_id(response.get("id")):
            continue
        assert owed.pop(response.get("id"), None) is not None, f"a response nobody was owed: {response}"
        error = response.get("error") or {}
        assert error.get("code") != INTERNAL_ERROR, f"an internal error: {response}"
    return sent


def test_thousands_of_fuzzed_lsp_messages_are_each_answered_and_the_server_lives(server):
    count = {"messages": 0}

    @settings(deadline=None, database=None, print_blob=True, suppress_health_check=list(HealthCheck),
              max_examples=int(os.environ.get("SPECD_FUZZ_LSP_BATCHES", 120)))
    @given(st.lists(bodies(), min_size=25, max_size=30))
    def batches(batch):
        count["messages"] += run_batch(server, batch)

    batches()
    print(f"\nfuzzed the language server: {count}")
    assert count["messages"] >= MESSAGES_PER_RUN, count

    uri = "file:///fuzz/after.py"
    server.write(json.dumps({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1,
        "text": "def f(x):\n    return x\n\n\ndef g(y):\n    "}}}).encode())
    reply = server.request("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": 5, "character": 4}, "context": {"triggerKind": 1}})
    assert "result" in reply and reply["result"]["items"], reply
    assert server.process.poll() is None
