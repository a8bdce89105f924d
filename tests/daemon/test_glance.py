"""A daemon answers a place it has not read from a glance, reads the whole prompt on its idle
lane, and answers from that once it is read: the same text as the whole prompt read cold."""

from __future__ import annotations

import asyncio

import pytest

from specd.daemon import protocol
from specd.daemon.client import Client, new_request_id
from specd.daemon.scheduler import READER
from tests.homes import LONG_TEXT, make_home


@pytest.fixture
async def glancing(tmp_path, tiny_target, tiny_draft, monkeypatch):
    home = make_home(tmp_path, tiny_target, tiny_draft)
    home.config_path.write_text(home.config_path.read_text().replace("glance_tokens = 0", "glance_tokens = 32"))
    for key, value in home.env.items():
        monkeypatch.setenv(key, value)
    started = home.specd("start")
    assert started.returncode == 0, started.stderr
    client = await Client.connect(home.config())
    yield home, client
    await client.close()
    home.specd("stop")


def ask(document: str, typed: str = "", **fields) -> protocol.Complete:
    fields = {"max_tokens": 8, "drafter": "none", **fields}
    return protocol.Complete(id=new_request_id(), document=document, prefix=LONG_TEXT + typed, **fields)


async def reads(home, document: str, count: int = 1) -> list:
    """The daemon's own reads of `document` (client READER, on the idle lane), once `count` have ended."""
    for _ in range(3000):
        if len(lines := [line for line in home.trace(document) if line.client == READER]) >= count:
            return lines
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {count} reads of {document} in the trace")


async def test_a_glance_first_then_the_whole_prompt_once_read(glancing):
    home, client = glancing
    document = "file:///glance.py"
    first = await client.complete(ask(document))
    assert first.outcome == "done" and first.stats.glance
    assert first.stats.prompt_tokens <= 32 + 3
    (read,) = await reads(home, document)
    assert (read.outcome, read.prefetch) == ("done", True) and not read.stats.glance
    assert read.stats.prefilled_tokens > 32, "it read the whole prompt"

    typed = await client.complete(ask(document, " "))
    assert not typed.stats.glance and typed.stats.reused_tokens > 32
    cold = await client.complete(ask("file:///cold.py", " ", reuse=False))
    assert not cold.stats.glance, "a cold run on purpose reads the whole prompt"
    assert typed.text == cold.text


async def test_a_request_preempts_the_read_and_the_next_glance_resumes_it(glancing):
    home, client = glancing
    document = "file:///preempted.py"
    first = await client.complete(ask(document, max_tokens=1))
    assert first.stats.glance
    for _ in range(3000):   # until the read has computed some chunks
        if any(a.document == document and a.state == "running" and a.passes >= 3
               for a in (await client.status()).active):
            break
        await asyncio.sleep(0.005)
    other = await client.complete(ask("file:///other.py", reuse=False, max_tokens=64))
    assert other.outcome == "done"
    (read,) = await reads(home, document)
    assert (read.outcome, read.cause) == ("cancelled", "preempted"), read
    again = await client.complete(ask(document, "x", max_tokens=1))
    assert again.stats.glance
    _, resumed = await reads(home, document, 2)
    assert resumed.outcome == "done"
    assert resumed.stats.reused_tokens >= read.stats.prefilled_tokens > 0, "what the first read computed stayed"
