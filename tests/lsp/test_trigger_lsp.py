"""The `[trigger]` rules over LSP: what reaches the daemon, counted in its trace (tiny models).

A request the language server holds back never reaches the daemon, so it has no trace line; one it
sends has one, written in the order the daemon received them. So once the trace shows the answer
to the last request of a burst, it shows every request of the burst that was sent.
"""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from tests.lsp.conftest import asked, close_editor, inline, open_editor, type_text

BURST = "return"      # typed at line 5, character 4 of the example, one key at a time
LONG_REST = (1, 4)    # "    return value.strip()": 19 characters right of the cursor that count


async def type_a_burst(client, gap_s: float) -> list:
    """Types BURST with an automatic request after each key, as an editor does; their answers."""
    requests = []
    for i, char in enumerate(BURST):
        type_text(client, i + 2, 5, 4 + i, char)
        requests.append(inline(client, 5, 5 + i, invoked=False))
        await asyncio.sleep(gap_s)
    return await asyncio.wait_for(asyncio.gather(*requests), 120)


@pytest.fixture
async def with_trigger(specd_env):
    """Opens `specd lsp` with the given trigger settings as initializationOptions."""
    clients = []

    async def open_with(trigger: dict, language: str = "python"):
        clients.append(await open_editor(specd_env, {"trigger": trigger}, language))
        return clients[-1]
    yield open_with
    for client in clients:
        await close_editor(client)


async def test_with_a_delay_a_burst_of_keys_sends_one_request(with_trigger, specd_env):
    # Keys 20 ms apart, a delay of a second: each key makes the one before it stale in its delay.
    client = await with_trigger({"delay_ms": 1000})
    answers = await type_a_burst(client, gap_s=0.02)
    assert [len(a.items) for a in answers[:-1]] == [0] * (len(BURST) - 1), "the stale ones answer nothing"
    lines = await asked(specd_env, client.uri)
    assert len(lines) == 1, f"one request for the burst, not {len(lines)}"
    assert lines[0].outcome == "done"


async def test_without_a_delay_each_key_sends_its_request(with_trigger, specd_env):
    """The same burst with the default delay, 0: the count above is the delay's doing."""
    client = await with_trigger({})
    await type_a_burst(client, gap_s=0.02)
    lines = await asked(specd_env, client.uri)
    assert len(lines) > 1, "the keys' requests reached the daemon (superseded there, newest wins)"


async def test_with_auto_off_only_an_invoked_request_reaches_the_daemon(with_trigger, specd_env):
    client = await with_trigger({"auto": False})
    answers = await type_a_burst(client, gap_s=0.02)
    assert all(not a.items for a in answers)
    invoked = await asyncio.wait_for(inline(client, 5, 4 + len(BURST)), 120)
    assert invoked.items, "a manual trigger completes with auto off"
    lines = await asked(specd_env, client.uri)
    assert len(lines) == 1, "none of the automatic requests was sent"


async def test_max_line_suffix_holds_back_automatic_requests_but_not_invoked_ones(with_trigger, specd_env):
    client = await with_trigger({"max_line_suffix": 8})
    automatic = await asyncio.wait_for(inline(client, *LONG_REST, invoked=False), 120)
    assert not automatic.items
    await asyncio.wait_for(inline(client, *LONG_REST), 120)
    lines = await asked(specd_env, client.uri)
    assert len(lines) == 1, "only the invoked request was sent"


async def test_a_language_turned_off_gets_nothing_and_a_manual_trigger_is_told_why(with_trigger, specd_env):
    client = await with_trigger({"languages": {"python": False}})
    answer = await asyncio.wait_for(inline(client, 5, 4), 120)
    assert not answer.items
    assert any("off for python" in message for message in client.messages), client.messages
    # Another document, in a language left on: its answer comes after anything sent for the first.
    other = (specd_env.root / "other.lua").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=other, language_id="lua", version=1, text="local function f(x)\n  ")))
    await asyncio.wait_for(inline(client, 1, 2, uri=other), 120)
    await asked(specd_env, other)
    assert specd_env.trace(client.uri) == [], "nothing at all was sent for python, not even a read-ahead"


async def test_an_editors_bad_trigger_settings_are_said_and_the_configs_used(with_trigger, specd_env):
    client = await with_trigger({"delay_ms": "soon"})
    assert any("initializationOptions" in m and "delay_ms" in m for m in client.messages), client.messages
    answer = await asyncio.wait_for(inline(client, 5, 4, invoked=False), 120)
    assert answer.items, "the server lives on, with the config's settings (auto on)"


async def test_did_change_configuration_changes_the_rules_and_refuses_bad_ones(with_trigger, specd_env):
    client = await with_trigger({})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"specd": {"trigger": {"auto": False}}}))
    assert not (await asyncio.wait_for(inline(client, 5, 4, invoked=False), 120)).items
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"trigger": {"max_line_suffix": -7}}))
    assert (await asyncio.wait_for(inline(client, 5, 4, invoked=False), 120)).items, \
        "a bad change falls back to the config's settings: auto on"
    assert any("didChangeConfiguration" in m and "max_line_suffix" in m for m in client.messages), client.messages
    lines = await asked(specd_env, client.uri)
    assert len(lines) == 1, "the request made with auto off was not sent"
