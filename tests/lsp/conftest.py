"""A world for `specd lsp` and the daemon it starts: tiny models, every folder temporary."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from specd.bench.replay import specd_command
from tests.homes import Home, make_home


@pytest.fixture
def specd_env(tmp_path, tiny_target, tiny_draft, monkeypatch) -> Home:
    """This process's environment points there too, so the test finds that daemon's files."""
    home = make_home(tmp_path, tiny_target, tiny_draft)
    for key, value in home.env.items():
        monkeypatch.setenv(key, value)
    yield home
    home.specd("stop")


async def asked(home: Home, uri: str, done: int = 1) -> list:
    """The daemon's trace lines for `uri`'s requests (not its prefetches), once `done` of them are
    answered: a line is written after its reply, so an editor can hold the answer before it."""
    for _ in range(3000):
        lines = [line for line in home.trace(uri) if not line.prefetch]
        if sum(line.outcome == "done" for line in lines) >= done:
            return lines
        await asyncio.sleep(0.01)
    raise AssertionError(f"the daemon answered fewer than {done} requests for {uri}: {home.trace(uri)}")


PY = "def parse(self, value):\n    return value.strip()\n\n\ndef render(self, value):\n    "


@pytest.fixture
async def editor(specd_env):
    """A started `specd lsp` with an open document; the daemon is stopped afterwards."""
    client = await open_editor(specd_env)
    yield client
    await close_editor(client)


async def open_editor(home: Home, options: dict | None = None, language: str = "python") -> LanguageClient:
    """`specd lsp` started with `options` as initializationOptions and example.py open in
    `language`; the window/showMessage texts it sends are kept in `client.messages`."""
    client = LanguageClient("test-editor", "1")
    client.messages = []

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def show_message(params: types.ShowMessageParams) -> None:
        client.messages.append(params.message)

    await client.start_io(*specd_command(), env={**os.environ, **home.env})
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                         initialization_options=options))
    client.initialized(types.InitializedParams())
    uri = (home.root / "example.py").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id=language, version=1, text=PY)))
    client.uri = uri
    return client


async def close_editor(client: LanguageClient) -> None:
    await asyncio.wait_for(client.shutdown_async(None), 30)
    client.exit(None)
    await client.stop()


def inline(client, line: int, character: int, uri: str | None = None, msg_id: str | None = None,
           invoked: bool = True):
    """An inline completion request; `invoked`: asked by hand, else automatic (typing)."""
    kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    params = types.InlineCompletionParams(
        context=types.InlineCompletionContext(trigger_kind=kind),
        text_document=types.TextDocumentIdentifier(uri or client.uri), position=types.Position(line, character))
    return client.protocol.send_request_async(types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id)


def type_text(client, version: int, line: int, character: int, text: str) -> None:
    position = types.Position(line, character)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(uri=client.uri, version=version),
        [types.TextDocumentContentChangePartial(range=types.Range(position, position), text=text)]))


class RawLsp:
    """JSON-RPC over `specd lsp`'s stdio, written by hand, to send what a typed client never would."""

    def __init__(self, process: asyncio.subprocess.Process):
        self.process, self.next_id = process, 0

    @classmethod
    async def start(cls, env: dict) -> RawLsp:
        process = await asyncio.create_subprocess_exec(
            *specd_command(), env={**os.environ, **env}, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        return cls(process)

    def write(self, data: bytes) -> None:
        self.process.stdin.write(data)

    def send(self, method: str, params: dict, request: bool = True) -> int | None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        self.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return message.get("id")

    async def reply(self, msg_id: int, timeout: float = 120) -> dict:
        """The response to `msg_id` (notifications and other messages on the way are skipped)."""
        async def read() -> dict:
            while True:
                length = 0
                while (line := await self.process.stdout.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                message = json.loads(await self.process.stdout.readexactly(length))
                if message.get("id") == msg_id and "method" not in message:
                    return message
        return await asyncio.wait_for(read(), timeout)

    async def open(self, uri: str, text: str) -> None:
        await self.reply(self.send("initialize", {"processId": None, "capabilities": {}, "rootUri": None}))
        self.send("initialized", {}, request=False)
        self.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python",
                                                            "version": 1, "text": text}}, request=False)

    def inline(self, uri: str, line: int, character: int) -> int:
        return self.send("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": character},
            "context": {"triggerKind": 1}})

    async def close(self) -> None:
        self.process.kill()
        await self.process.wait()


@pytest.fixture
async def raw(specd_env):
    lsp = await RawLsp.start(specd_env.env)
    uri = (specd_env.root / "raw.py").as_uri()
    await lsp.open(uri, PY)
    lsp.uri = uri
    yield lsp
    await lsp.close()
