"""Newest-keystroke-wins scheduling in a real daemon: bursts, cancels, disconnects, one reply each."""

from __future__ import annotations

import asyncio

import pytest

from specd.daemon import protocol
from specd.daemon.client import Client, new_request_id
from tests.daemon.conftest import long_request, trace_of, until_running
from tests.homes import LONG_TEXT


def keystroke(document: str, typed: str, **fields) -> protocol.Complete:
    """The request after typing `typed` at the end of the long text."""
    return protocol.Complete(id=new_request_id(), document=document, text=LONG_TEXT + typed,
                             cursor=len(LONG_TEXT) + len(typed), max_tokens=8, **fields)


async def test_a_burst_of_50_the_newest_wins_and_none_is_lost(daemon, client):
    document = "file:///burst.py"
    typed = "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range"[:50]
    first = keystroke(document, typed[:1])
    pending = [asyncio.ensure_future(client.complete(first))]
    await until_running(client, first.id)             # the first is in flight when the rest arrive
    rest = [keystroke(document, typed[: i + 1]) for i in range(1, 50)]
    pending += [asyncio.ensure_future(client.complete(m)) for m in rest]
    replies = await asyncio.gather(*pending)

    assert [r.id for r in replies] == [first.id] + [m.id for m in rest], "every request got its own reply"
    assert replies[-1].outcome == "done"
    assert [r.outcome for r in replies[:-1]] == ["cancelled"] * 49
    lines = {line.id: line for line in await trace_of(daemon, document, 50)}
    assert {line.cause for i, line in lines.items() if i != rest[-1].id} == {"superseded"}
    assert lines[first.id].passes_after_cancel <= 1, "the one in flight stopped at its next step"
    assert replies[-1].stats.reused_tokens >= lines[first.id].stats.prefilled_tokens, \
        "what the cancelled request prefilled stayed cached for the newest"


async def test_without_supersede_every_request_is_served(daemon, client):
    messages = [keystroke("file:///all.py", "x" * i, supersede=False) for i in range(1, 4)]
    replies = await asyncio.gather(*(client.complete(m) for m in messages))
    assert [r.outcome for r in replies] == ["done"] * 3


async def test_a_long_request_cancelled_returns_within_one_forward_pass(daemon, client):
    message = long_request("file:///cancel.py")
    task = asyncio.ensure_future(client.complete(message))
    await until_running(client, message.id, passes=3)
    await client.cancel(message.id)
    reply = await task
    assert reply.outcome == "cancelled"
    (line,) = await trace_of(daemon, message.document)
    assert line.cause == "cancel"
    assert line.passes_after_cancel is not None and line.passes_after_cancel <= 1, line
    assert reply.stats.prefilled_tokens < reply.stats.prompt_tokens - 1, "it stopped before finishing"


async def test_a_disconnect_cancels(daemon, client):
    leaving = await Client.connect(daemon.config())
    message = long_request("file:///disconnect.py")
    task = asyncio.ensure_future(leaving.complete(message))
    await until_running(client, message.id, passes=3)
    await leaving.close()
    with pytest.raises(ConnectionError):
        await task
    (line,) = await trace_of(daemon, message.document)
    assert (line.outcome, line.cause) == ("cancelled", "disconnect")
    assert line.passes_after_cancel is not None and line.passes_after_cancel <= 1
    status = await client.status()
    assert not [a for a in status.active if a.document == message.document], "nothing of it is left"


async def test_cancelling_the_awaiting_task_cancels_the_request(daemon, client):
    message = long_request("file:///task.py")
    task = asyncio.ensure_future(client.complete(message))
    await until_running(client, message.id)
    task.cancel()
    (line,) = await trace_of(daemon, message.document)
    assert (line.outcome, line.cause) == ("cancelled", "cancel")


async def test_each_document_keeps_its_cache(daemon, client):
    texts = {f"file:///warm-{name}.py": LONG_TEXT.replace("x", name) for name in ("a", "b")}
    ask = lambda document: client.complete(protocol.Complete(  # noqa: E731
        id=new_request_id(), document=document, text=texts[document], cursor=len(texts[document]) // 2,
        max_tokens=4))
    for document in texts:
        cold = await ask(document)
        assert cold.stats.reused_tokens == 0
    # after b: a is still cached (another limit, so that the suggestion cache has no answer)
    again = await client.complete(protocol.Complete(
        id=new_request_id(), document="file:///warm-a.py", text=texts["file:///warm-a.py"],
        cursor=len(texts["file:///warm-a.py"]) // 2, max_tokens=5))
    assert again.stats.reused_tokens == again.stats.prompt_tokens - 1
    assert again.stats.prefilled_tokens == 0
    assert (await client.status()).cache_documents >= 2
