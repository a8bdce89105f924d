"""`specd lsp` when its daemon dies: SIGKILL with a request in flight, as a crash or the kernel's
out-of-memory killer would end it."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from specd.daemon.client import Client
from tests.homes import LONG_TEXT
from tests.lsp.conftest import inline


async def until_document_runs(client: Client, uri: str, timeout_s: float = 120.0) -> None:
    """Once the daemon is running a request for `uri` (the LSP server's ids are its own)."""
    deadline = time.monotonic() + timeout_s
    while not any(a.document == uri and a.state == "running" and a.passes >= 2 for a in (await client.status()).active):
        assert time.monotonic() < deadline, f"no request for {uri} ran within {timeout_s:.0f} s"
        await asyncio.sleep(0.005)


async def test_a_daemon_killed_mid_request_is_an_error_then_a_new_daemon_serves(editor, specd_env):
    uri = (specd_env.root / "long.py").as_uri()
    editor.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=LONG_TEXT)))
    lines = LONG_TEXT.count("\n")
    assert (await asyncio.wait_for(inline(editor, 5, 4), 120)).items, "the daemon serves before the crash"
    first_pid = specd_env.daemon_pid()

    in_flight = inline(editor, lines, 0, uri=uri)
    watcher = await Client.connect(specd_env.config())
    await until_document_runs(watcher, uri)
    await watcher.close()
    specd_env.kill_daemon()
    with pytest.raises(JsonRpcException) as failed:
        await asyncio.wait_for(in_flight, 30)
    assert failed.value.code == -32803 and "went away mid-request" in str(failed.value), failed.value

    after = await asyncio.wait_for(inline(editor, 5, 4), 180)
    assert after.items, "the next request is served by a daemon started again"
    second_pid = specd_env.daemon_pid()
    assert second_pid != first_pid
    os.kill(second_pid, 0)   # alive
