"""Reading a document ahead, before the first key there: on didOpen (a document that fits the
prompt whole) and where specd's editor clients say the cursor rests (`specd/didFocus`)."""

from __future__ import annotations

import asyncio
import os

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from specd.bench.replay import specd_command
from specd.lsp.focus import DID_FOCUS, read_focus
from tests.lsp.conftest import PY, asked, inline

# Long enough that no prompt holds it whole (the tests' prefix budget is the default 1536 tokens):
# opening it reads nothing ahead, so only didFocus does.
LONG = "".join(f"def f{i}(value):\n    return value * {i} + {i * 7} - len(str(value))\n\n\n" for i in range(150))


async def start(specd_env, **options) -> LanguageClient:
    client = LanguageClient("test-editor", "1")
    await client.start_io(*specd_command(), env={**os.environ, **specd_env.env})
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                         initialization_options=options or None))
    client.initialized(types.InitializedParams())
    return client


def open_document(client, uri: str, text: str) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))


def focus(client, uri: str, line: int, character: int) -> None:
    client.protocol.notify(DID_FOCUS, {"textDocument": {"uri": uri},
                                       "position": {"line": line, "character": character}})


async def read_ahead_done(specd_env, uri: str, count: int = 1) -> None:
    for _ in range(3000):
        if sum(r.prefetch and r.outcome == "done" for r in specd_env.trace(uri)) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no read-ahead of {uri} was served: {specd_env.trace(uri)}")


async def stop(client) -> None:
    await asyncio.wait_for(client.shutdown_async(None), 30)
    client.exit(None)
    await client.stop()


async def test_a_document_is_read_ahead_where_the_cursor_rests(specd_env):
    client = await start(specd_env)
    uri = (specd_env.root / "long.py").as_uri()
    try:
        open_document(client, uri, LONG)
        await asyncio.sleep(1.0)
        assert specd_env.trace(uri) == [], "a document the prompt cannot hold whole is not read on opening"
        focus(client, uri, 200, 4)
        await read_ahead_done(specd_env, uri)
        answer = await asyncio.wait_for(inline(client, 200, 4, uri=uri), 120)
        there = (await asked(specd_env, uri))[-1]
        assert there.stats.from_cache and there.passes == 0, "the request there was the one read ahead"
        assert answer.items, "and it shows what was read ahead"
    finally:
        await stop(client)


async def test_opening_a_short_document_reads_it_at_its_end(specd_env):
    client = await start(specd_env)
    uri = (specd_env.root / "short.py").as_uri()
    try:
        open_document(client, uri, PY)
        await read_ahead_done(specd_env, uri)
        await asyncio.wait_for(inline(client, 5, 4, uri=uri), 120)      # PY's end
        there = (await asked(specd_env, uri))[-1]
        assert there.stats.from_cache and there.passes == 0
    finally:
        await stop(client)


async def test_a_newer_read_ahead_elsewhere_cancels_the_older(specd_env):
    client = await start(specd_env, prefetch=False)
    first, second = (specd_env.root / "a.py").as_uri(), (specd_env.root / "b.py").as_uri()
    busy = (specd_env.root / "busy.py").as_uri()
    try:
        for uri, text in ((first, LONG), (second, LONG.replace("value", "item")), (busy, LONG.replace("f", "g"))):
            open_document(client, uri, text)
        await asyncio.wait_for(inline(client, 0, 0, uri=busy), 120)   # the daemon is up
        asked = inline(client, 590, 0, uri=busy)   # a cold prompt keeps the worker busy meanwhile
        focus(client, first, 590, 0)
        focus(client, second, 590, 0)
        await asyncio.wait_for(asked, 120)
        await read_ahead_done(specd_env, second)
        ran = specd_env.trace(first)
        assert ran and all(r.outcome == "cancelled" for r in ran), ran
    finally:
        await stop(client)


async def test_warm_false_reads_nothing_ahead(specd_env):
    client = await start(specd_env, warm=False)
    uri = (specd_env.root / "short.py").as_uri()
    try:
        open_document(client, uri, PY)
        focus(client, uri, 1, 4)
        await asyncio.wait_for(inline(client, 5, 4, uri=uri), 120)
        await asyncio.sleep(0.5)
        assert [r.prefetch for r in specd_env.trace(uri)][:1] == [False], "the first the daemon saw was the request"
    finally:
        await stop(client)


@pytest.mark.parametrize("params,match", [
    ({"textDocument": {"uri": "file:///x.py"}}, "position"),
    ({"textDocument": {"uri": "file:///x.py"}, "position": {"line": -1, "character": 0}}, "line"),
    ({"textDocument": {}, "position": {"line": 0, "character": 0}}, "uri"),
    ([1, 2], "Expected `object`"),
])
def test_focus_params_that_do_not_fit_say_what(params, match):
    with pytest.raises(ValueError, match=match):
        read_focus(params)


async def test_a_bad_focus_is_logged_and_the_server_lives_on(raw):
    raw.send(DID_FOCUS, {"textDocument": {"uri": raw.uri}, "position": {"line": 99, "character": 0}}, request=False)
    raw.send(DID_FOCUS, {"textDocument": {"uri": "file:///not/open.py"}, "position": {"line": 0, "character": 0}},
             request=False)
    raw.send(DID_FOCUS, {"position": "here"}, request=False)
    assert (await raw.reply(raw.inline(raw.uri, 5, 4)))["result"]["items"], "the server lives on"
