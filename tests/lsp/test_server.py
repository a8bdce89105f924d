"""`specd lsp` end to end over stdio with pygls's own client, a real daemon and tiny models."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.lsp.conftest import asked, inline, type_text


async def test_inline_completion_after_incremental_changes(editor):
    type_text(editor, 2, 5, 4, "return")
    result = await asyncio.wait_for(inline(editor, 5, 10), 120)
    assert isinstance(result, types.InlineCompletionList) and len(result.items) == 1
    item = result.items[0]
    assert item.insert_text.strip(), "never an empty item"
    assert item.range.start == types.Position(5, 10), "the range starts at the cursor"
    assert item.insert_text == item.insert_text.rstrip() and "\n\n" not in item.insert_text[-2:]


async def test_cancel_request_gives_request_cancelled(editor):
    msg_id = str(uuid.uuid4())
    future = inline(editor, 5, 4, msg_id=msg_id)
    await asyncio.sleep(0.05)
    editor.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
    with pytest.raises(JsonRpcException) as error:
        await asyncio.wait_for(future, 120)
    assert error.value.code == -32800
    after = await asyncio.wait_for(inline(editor, 5, 4), 120)
    assert after.items, "the server and the daemon live on"


async def test_a_request_made_stale_by_a_newer_one_is_answered_empty_at_once(editor):
    first = inline(editor, 5, 4)
    type_text(editor, 2, 5, 4, "r")
    second = inline(editor, 5, 5)
    stale = await asyncio.wait_for(first, 120)
    assert len(stale.items) == 0
    assert not second.done(), "the stale answer came before the newer request was served"
    assert (await asyncio.wait_for(second, 120)).items


async def test_typed_through_suggestion_is_answered_without_a_model_call(editor, specd_env):
    shown = (await asyncio.wait_for(inline(editor, 5, 4), 120)).items[0].insert_text
    first = shown[0]
    assert first != "\n" and shown[1:].strip(), f"the tiny model's suggestion {shown!r} suits this test"
    specd_env.kill_daemon()  # no model to call any more
    type_text(editor, 2, 5, 4, first)
    rest = await asyncio.wait_for(inline(editor, 5, 5), 30)
    assert rest.items[0].insert_text == shown[1:]


async def test_a_suggestion_shown_has_its_accept_branch_ready_for_tab(editor, specd_env):
    shown = (await asyncio.wait_for(inline(editor, 5, 4), 120)).items[0].insert_text
    answered = (await asked(specd_env, editor.uri))[-1].received_at
    for _ in range(2000):   # the prefetch runs once the suggestion is out (not the read-ahead on opening)
        if any(line.prefetch and line.outcome == "done" and line.received_at > answered
               for line in specd_env.trace(editor.uri)):
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError(f"no prefetch of the accept branch was served: {specd_env.trace(editor.uri)}")
    type_text(editor, 2, 5, 4, shown)                       # Tab: the editor inserts the suggestion
    *above, last = shown.split("\n")
    await asyncio.wait_for(inline(editor, 5 + len(above), (0 if above else 4) + len(last)), 120)
    tab = (await asked(specd_env, editor.uri, done=2))[-1]
    assert tab.stats.from_cache and tab.passes == 0, f"the request after Tab was the one prefetched: {tab}"


@pytest.mark.parametrize("line,character,match", [(50, 0, "outside"), (0, 400, "past the end"), (-1, 0, "line")])
async def test_positions_outside_the_document_are_invalid_params(raw, line, character, match):
    error = (await raw.reply(raw.inline(raw.uri, line, character)))["error"]
    assert error["code"] == -32602 and match in error["message"]
    assert (await raw.reply(raw.inline(raw.uri, 5, 4)))["result"]["items"], "the server lives on"


async def test_unknown_document_is_invalid_params(raw):
    error = (await raw.reply(raw.inline("file:///nowhere/missing.py", 0, 0)))["error"]
    assert error["code"] == -32602 and "not open" in error["message"]


async def test_garbage_bytes_do_not_kill_the_server(raw):
    raw.write(b"Content-Length: 12\r\n\r\n{not json!!}")
    raw.write(b"\xff\xfe garbage without a header\r\n\r\n")
    raw.write(b"Content-Length: 2\r\n\r\n[]")
    assert (await raw.reply(raw.inline(raw.uri, 5, 4)))["result"]["items"], "the server lives on"


async def test_completion_fallback_gives_an_item_with_an_edit(editor):
    params = types.CompletionParams(text_document=types.TextDocumentIdentifier(editor.uri),
                                    position=types.Position(5, 4))
    result = await asyncio.wait_for(editor.text_document_completion_async(params), 120)
    assert len(result.items) == 1 and result.items[0].text_edit.new_text.strip()


async def test_the_server_survives_a_daemon_restart(editor, specd_env):
    assert (await asyncio.wait_for(inline(editor, 5, 4), 120)).items
    specd_env.kill_daemon()
    type_text(editor, 2, 5, 4, "x")
    result = await asyncio.wait_for(inline(editor, 5, 5), 180)
    assert result.items, "a new daemon was started and answered"
