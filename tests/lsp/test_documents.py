"""Documents an editor really sends, and some it should not: 10 MB, binary garbage, text that is
not valid Unicode, positions beyond the end, a path with a space, and 1,000 open at once. Each
gets a sane answer or a clear error, and the server lives on."""

from __future__ import annotations

import random
import re

import pytest

from specd.daemon.client import Client
from tests.homes import make_home
from tests.lsp.conftest import PY, RawLsp

BIG = "".join(f"def f{i}(x):\n    return x * {i} + {i % 7}\n\n\n" for i in range(250_000))[: 10 << 20]


@pytest.fixture
async def lsp(tmp_path, tiny_target, tiny_draft, monkeypatch):
    """`specd lsp` on a daemon with the default frame cap (8 MB), as users run it."""
    home = make_home(tmp_path, tiny_target, tiny_draft, max_frame_bytes=8 << 20)
    for key, value in home.env.items():
        monkeypatch.setenv(key, value)
    server = await RawLsp.start(home.env)
    await server.reply(server.send("initialize", {"processId": None, "capabilities": {}, "rootUri": None}))
    server.send("initialized", {}, request=False)
    server.home = home
    yield server
    await server.close()
    home.specd("stop")


def opened(server: RawLsp, uri: str, text: str) -> None:
    server.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                          "text": text}}, request=False)


def end_of(text: str) -> tuple[int, int]:
    lines = re.split("\r\n|\r|\n", text)     # LSP's line ends, and only those
    return len(lines) - 1, len(lines[-1])


async def test_a_10_mb_document_is_answered_at_its_end_and_its_middle(lsp):
    uri = "file:///big/ten.py"
    opened(lsp, uri, BIG)
    line, character = end_of(BIG)
    for at in ((line, character), (line // 8 * 4 + 1, 4)):   # the end, and a "    return" line midway
        reply = await lsp.reply(lsp.inline(uri, *at), timeout=300)
        assert "result" in reply, reply
    client = await Client.connect(lsp.home.config())
    status = await client.status()
    await client.close()
    assert status.errors == 0, "nothing the daemon was sent was refused"


@pytest.mark.parametrize("kind", ["binary garbage", "lone surrogates"])
async def test_text_that_is_not_code_or_not_unicode_gets_a_sane_answer(lsp, kind):
    rng = random.Random(0)
    if kind == "binary garbage":
        text = bytes(rng.randrange(256) for _ in range(200_000)).decode("latin-1")
    else:       # JSON can carry a lone surrogate; UTF-8 (and so the daemon's socket) cannot
        text = "def f(x):\n    s = '\ud800'\n    return s\ud83d\n\n" * 50
    uri = f"file:///odd/{kind.replace(' ', '-')}.py"
    opened(lsp, uri, text)
    line, character = end_of(text)
    reply = await lsp.reply(lsp.inline(uri, line, character))
    assert "result" in reply, reply
    assert (await lsp.reply(lsp.inline(uri, 0, 0)))["result"] is not None


async def test_invalid_utf8_is_dropped_and_said_clearly_after(lsp):
    body = b'{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": ' \
        b'"file:///odd/bytes.py", "languageId": "python", "version": 1, "text": "x = \xff\xfe\\n"}}}'
    lsp.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    error = (await lsp.reply(lsp.inline("file:///odd/bytes.py", 0, 0)))["error"]
    assert error["code"] == -32602 and "not open" in error["message"], error
    opened(lsp, "file:///odd/fine.py", PY)
    assert (await lsp.reply(lsp.inline("file:///odd/fine.py", 5, 4)))["result"]["items"], "the server lives on"


@pytest.mark.parametrize("line, character", [(6, 0), (5, 5), (2**31 - 1, 0), (0, 2**31 - 1), (5, -1)])
async def test_positions_beyond_the_end_are_invalid_params(lsp, line, character):
    opened(lsp, "file:///pos.py", PY)
    error = (await lsp.reply(lsp.inline("file:///pos.py", line, character)))["error"]
    assert error["code"] == -32602, error


async def test_a_uri_with_a_space_is_the_document_opened(lsp):
    uri = "file:///my%20project/caf%C3%A9.py"     # what VS Code sends for "/my project/café.py"
    opened(lsp, uri, PY)
    assert (await lsp.reply(lsp.inline(uri, 5, 4)))["result"]["items"]


async def test_a_thousand_open_documents(lsp):
    uris = [f"file:///many/m{i}.py" for i in range(1000)]
    for i, uri in enumerate(uris):
        opened(lsp, uri, f"def f{i}(x):\n    return x + {i}\n\n\ndef g{i}(y):\n    ")
    for uri in (uris[0], uris[499], uris[-1]):
        assert "result" in await lsp.reply(lsp.inline(uri, 5, 4)), uri
    for uri in uris[:500]:
        lsp.send("textDocument/didClose", {"textDocument": {"uri": uri}}, request=False)
    assert "result" in await lsp.reply(lsp.inline(uris[-2], 5, 4))
    error = (await lsp.reply(lsp.inline(uris[0], 5, 4)))["error"]
    assert "not open" in error["message"], "a closed document is gone"

