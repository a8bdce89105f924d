"""The server backend against a real llama.cpp server on 127.0.0.1, serving the built-in target's
GGUF: its completions are the server's own greedy output under the same stop rules, a cancel
stops the server's generation, and a server killed mid-stream is said and found again.

The binary is $LLAMA_SERVER, else where `.ci/llama-server` keeps it; the GGUF is $LLAMA_GGUF,
else where `.ci/llama-server --gguf` keeps it. CI builds both before the tests (`.ci/run`);
elsewhere these tests are skipped, saying which is missing."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import msgspec
import pytest

from specd.daemon.config import Config
from specd.daemon.remote import FINISH, RemoteBackend, rules
from specd.decoding.request import CompletionRequest
from specd.decoding.stops import Stopper

pytestmark = pytest.mark.real
ROOT = Path(__file__).resolve().parents[2]
FIB = (ROOT / "examples" / "fib.py").read_text()
AT_5_1 = "".join(FIB.splitlines(keepends=True)[:4])


def kept(option: str, variable: str) -> Path | None:
    if os.environ.get(variable):
        return Path(os.environ[variable])
    done = subprocess.run([str(ROOT / ".ci" / "llama-server"), option], capture_output=True, text=True)
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


BINARY, GGUF = kept("--path", "LLAMA_SERVER"), kept("--gguf-path", "LLAMA_GGUF")
MISSING = [f"{what} {path} (build: .ci/llama-server{flag})" for what, path, flag in
           (("no llama-server at", BINARY, ""), ("no GGUF at", GGUF, " --gguf")) if path is None or not path.is_file()]
if MISSING:
    pytest.skip("; ".join(MISSING), allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """llama-server on 127.0.0.1:`port`, one slot, with /slots; started and killed at will."""

    def __init__(self, port: int, log: Path):
        self.port, self.log, self.process = port, log, None
        self.url = f"http://127.0.0.1:{port}"

    def start(self, wait_s: float = 300.0) -> None:
        command = [str(BINARY), "-m", str(GGUF), "--host", "127.0.0.1", "--port", str(self.port), "-c", "4096",
                   "-t", str(min(4, os.cpu_count() or 1)), "-np", "1", "--slots", "--metrics", "--no-webui"]
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"llama-server exited: {self.log.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise AssertionError(f"llama-server did not load within {wait_s} s")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def get(self, path: str):
        with urllib.request.urlopen(f"{self.url}{path}", timeout=10) as reply:
            return json.loads(reply.read())

    def post(self, body: dict) -> dict:
        request = urllib.request.Request(f"{self.url}/v1/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300) as reply:
            return json.loads(reply.read())

    def busy(self) -> bool:
        return any(slot["is_processing"] for slot in self.get("/slots"))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = LlamaServer(free_port(), tmp_path_factory.mktemp("llama") / "llama-server.log")
    s.start()
    yield s
    if s.process.poll() is None:
        s.kill()


def backend(server: LlamaServer) -> RemoteBackend:
    text = (f'[backend]\nkind = "server"\nurl = "{server.url}"\nmodel = "qwen2.5-coder-1.5b-instruct"\n'
            'timeout_s = 120\n')
    return RemoteBackend(msgspec.toml.decode(text.encode(), type=Config))


CASES = [
    CompletionRequest(AT_5_1, FIB[len(AT_5_1):], max_tokens=24),   # `specd complete --file examples/fib.py --at 5:1`
    CompletionRequest("import os\n\n\ndef list_python_files(folder):\n    ", "\n", max_tokens=24),
    CompletionRequest("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n", "", max_tokens=16, single_line=True),
]


@pytest.mark.parametrize("request_", CASES, ids=["fib", "listdir", "single-line"])
def test_completions_are_the_servers_own_greedy_output(server, request_):
    b = backend(server)
    got = b.complete(request_, lambda: False)
    assert got.error is None and got.outcome == "done"
    # the server alone, not streamed, on the same prompt; then the same stop rules on its text
    own = server.post({"prompt": _prompt(b, request_), "max_tokens": request_.max_tokens, "temperature": 0.0})
    stopper = Stopper(None, rules(request_))
    if not stopper.push_text(own["choices"][0]["text"]):
        stopper.reason = FINISH[own["choices"][0]["finish_reason"]]
    assert (got.text, got.stop_reason) == (stopper.text, stopper.reason)
    ended_by_server = got.stop_reason in ("stop_token", "max_tokens")
    assert got.stats.server_timings == ended_by_server, "the server's own timings come with its own end"


def _prompt(b: RemoteBackend, request: CompletionRequest) -> str:
    from specd.decoding.textprompt import fim_text

    return fim_text(b.template, b.budget, request.prefix, request.suffix, request.extras)


def test_a_cancelled_request_stops_generating_at_the_server(server):
    b = backend(server)
    long = CompletionRequest("numbers = [\n    1,\n    2,\n    3,\n", "", max_tokens=256, stop_at_suffix=False)
    result = b.complete(long, lambda: b.passes() >= 5)
    assert result.outcome == "cancelled"
    deadline = time.monotonic() + 10
    while server.busy() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not server.busy(), "the server stopped the request whose stream was closed"


def test_a_server_killed_mid_stream_is_said_and_found_again(server):
    b = backend(server)
    long = CompletionRequest("numbers = [\n    10,\n    20,\n", "", max_tokens=256, stop_at_suffix=False)

    def kill_after_a_few() -> bool:
        if b.passes() >= 3 and server.process.poll() is None:
            server.kill()
        return False

    down = b.complete(long, kill_after_a_few)
    assert (down.text, down.stop_reason) == ("", "server_error") and "the inference server" in down.error, down
    assert "NOT answering" in b.describe().device_reason
    again = b.complete(CASES[1], lambda: False)
    assert again.error is not None, "still down"
    server.start()
    back = b.complete(CASES[1], lambda: False)
    assert back.error is None and back.text
    assert b.describe().device_reason.startswith("server: answering since")


def test_eight_editors_typing_through_one_server_lose_nothing(server, tmp_path):
    """`specd stress`: eight `specd lsp` processes typing against one daemon whose backend is the server."""
    from tests.homes import SPECD, config_file

    # short prompts: one slot on a CPU reads ~40 prompt tokens a second, and the eight last keys
    # are answered one after another within the editors' 30 s of grace
    config = config_file(tmp_path, f'[backend]\nkind = "server"\nurl = "{server.url}"\n'
                         'model = "qwen2.5-coder-1.5b-instruct"\ntimeout_s = 120\n'
                         "[engine]\nprefix_tokens = 48\nsuffix_tokens = 0\n[completion]\nmax_tokens = 6\n")
    out = tmp_path / "stress.json"
    done = subprocess.run([SPECD, "--config", str(config), "stress", "--clients", "8", "--cps", "4", "--seconds", "10",
                           "--json", str(out)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    r = json.loads(out.read_text())
    assert r["requests"] == r["completed"] + r["cancelled"] + r["errors"] + r["lost"]
    assert r["lost"] == 0 and r["errors"] == 0 and not r["crashed"], r
    assert r["completed"] >= 1 and r["cancelled"] >= 1, "answers, and keys superseded at the server"


async def test_through_specd_lsp_the_suggestion_is_the_servers_own_greedy_output(server, tmp_path):
    """An editor's inline completion through `specd lsp` and a daemon on the server backend:
    the server's own greedy text for the same prompt, under the same stop rules and the language
    server's usual clean-up."""
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient
    from pygls.workspace import TextDocument

    from specd.bench.replay import specd_command
    from specd.lsp.context import cursor_at
    from specd.lsp.postprocess import clean
    from tests.homes import SPECD, config_file

    uri = (tmp_path / "fib.py").as_uri()
    cursor = cursor_at(TextDocument(uri, FIB), types.Position(4, 0), "auto")   # examples/fib.py at 5:1
    request = CompletionRequest(cursor.prefix, cursor.suffix, max_tokens=24, single_line=cursor.single_line)
    own = server.post({"prompt": _prompt(backend(server), request), "max_tokens": 24, "temperature": 0.0})
    stopper = Stopper(None, rules(request))
    if not stopper.push_text(own["choices"][0]["text"]):
        stopper.reason = FINISH[own["choices"][0]["finish_reason"]]
    expected = clean(stopper.text, cursor, stopper.reason)
    assert expected is not None, f"the server suggests something here: {stopper.text!r}"

    for name in ("run", "state", "cache"):
        (tmp_path / name).mkdir(mode=0o700)
    config = config_file(tmp_path, f'[backend]\nkind = "server"\nurl = "{server.url}"\n'
                         'model = "qwen2.5-coder-1.5b-instruct"\ntimeout_s = 120\n'
                         "[completion]\nmax_tokens = 24\nfirst_line_ms = 0\ncut_ms = 0\n")
    env = {**os.environ, "SPECD_CONFIG": str(config), "XDG_RUNTIME_DIR": str(tmp_path / "run"),
           "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    client = LanguageClient("test-editor", "1")
    await client.start_io(*specd_command(), env=env)
    try:
        await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                             initialization_options={"warm": False}))
        client.initialized(types.InitializedParams())
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="python", version=1, text=FIB)))
        params = types.InlineCompletionParams(
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
            text_document=types.TextDocumentIdentifier(uri), position=types.Position(4, 0))
        result = await client.protocol.send_request_async(types.TEXT_DOCUMENT_INLINE_COMPLETION, params)
        items = result.items if hasattr(result, "items") else result
        shown = items[0].insert_text if items else None
        assert shown == expected.text, (shown, expected, stopper.text)
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
        subprocess.run([SPECD, "stop"], env=env, capture_output=True, timeout=60)
